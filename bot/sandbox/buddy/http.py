"""The HTTP client of the Buddy.Works sandbox backend: one `httpx.AsyncClient` per
provider, Buddy's URL layout, and requests sent under the retry policy of `retries`, with
every unwanted answer or network failure turned into a project error (`errors`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from bot.errors import SandboxError, SandboxUnavailable
from bot.sandbox.buddy.errors import OutcomeUnknown, Scope, StreamInterrupted, api_error
from bot.sandbox.buddy.retries import (
    RATE_LIMIT_WAITS,
    READ_ATTEMPTS,
    REQUEST_TIMEOUT_S,
    TimeoutKind,
    request_timeouts,
    retry_delay,
)

ERROR_BODY_BYTES = 64 * 1024


@dataclass(frozen=True)
class _Call:
    method: str
    url: str
    scope: Scope
    what: str
    subject: str
    params: Mapping[str, str] | None
    json: Any
    content: AsyncIterator[bytes] | None
    headers: Mapping[str, str] | None
    timeout: httpx.Timeout
    idempotent: bool  # safe to resend after a 5xx, timeout or broken connection
    replayable: bool  # the body can be sent again (false for a streamed upload)
    accept: Collection[int]  # statuses returned to the caller instead of raised


class BuddyHttp:
    """The process's connection to the Buddy API for one workspace (and project)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        workspace: str,
        project: str | None,
        retry_base_delay_s: float = 1.0,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.workspace = workspace
        self.project = project
        self._token = token
        self._base_delay = retry_base_delay_s
        self._timeouts = request_timeouts(timeout_s)
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                "User-Agent": "slack-code-interpreter",
            },
            timeout=self._timeouts["default"],
        )

    # -- URLs --

    def scope_params(self) -> dict[str, str]:
        return {"project_name": self.project} if self.project else {}

    def workspace_url(self, *parts: str) -> str:
        return "/".join(["", "workspaces", quote(self.workspace, safe=""), *parts])

    def sandbox_url(self, sandbox_id: str, *parts: str) -> str:
        return self.workspace_url("sandboxes", quote(sandbox_id, safe=""), *parts)

    # -- requests --

    async def request(
        self,
        method: str,
        url: str,
        *,
        scope: Scope,
        what: str,
        subject: str = "",
        params: Mapping[str, str] | None = None,
        json: Any = None,
        content: AsyncIterator[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timing: TimeoutKind = "default",
        idempotent: bool = False,
        replayable: bool = True,
        accept: Collection[int] = (),
    ) -> httpx.Response:
        """Send a request and read its answer; errors come back as project errors."""
        call = _Call(
            method, url, scope, what, subject, params, json, content, headers,
            self._timeouts[timing], idempotent, replayable, accept,
        )  # fmt: skip
        return await self._send(call, stream=False)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        url: str,
        *,
        scope: Scope,
        what: str,
        subject: str = "",
        params: Mapping[str, str] | None = None,
        accept_type: str = "application/octet-stream",
        timing: TimeoutKind = "stream",
    ) -> AsyncIterator[httpx.Response]:
        """A streamed GET (opening is retried: no byte has reached the caller yet)."""
        call = _Call(
            "GET", url, scope, what, subject, params, None, None, {"Accept": accept_type},
            self._timeouts[timing], True, True, (),
        )  # fmt: skip
        response = await self._send(call, stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    async def chunks(self, response: httpx.Response, what: str) -> AsyncIterator[bytes]:
        """The body of a streamed answer; a broken connection raises StreamInterrupted."""
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as exc:
            raise StreamInterrupted(
                f"the connection to Buddy broke while {what}: {_describe(exc)}"
            ) from None

    def json_of(self, response: httpx.Response, what: str) -> dict[str, Any]:
        """A JSON object answer ({} for an empty body, as the SDKs accept)."""
        if not response.content.strip():
            return {}
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise SandboxError(f"Buddy sent an unreadable answer while {what}")
        return data

    async def aclose(self) -> None:
        await self._client.aclose()

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    # -- internals --

    async def _send(self, call: _Call, *, stream: bool) -> httpx.Response:
        if self._client.is_closed:
            raise SandboxUnavailable("the connection to Buddy is closed (the bot is stopping)")
        failures = waits = 0
        while True:
            try:
                response = await self._attempt(call, stream)
            except httpx.TransportError as exc:
                resend = call.replayable and (call.idempotent or _never_sent(exc))
                if resend and failures < READ_ATTEMPTS - 1:
                    failures += 1
                    await asyncio.sleep(self._base_delay * 2 ** (failures - 1))
                    continue
                raise self._transport_error(call, exc) from None
            except httpx.HTTPError as exc:
                detail = _describe(exc)
                raise SandboxError(f"talking to Buddy failed while {call.what}: {detail}") from None
            if isinstance(response, httpx.Response):
                return response
            status, headers, body = response
            if status == 429 and call.replayable and waits < RATE_LIMIT_WAITS:
                waits += 1
                await asyncio.sleep(retry_delay(headers, self._base_delay * 2 ** (waits - 1)))
                continue
            if status >= 500 and call.idempotent and failures < READ_ATTEMPTS - 1:
                failures += 1
                await asyncio.sleep(self._base_delay * 2 ** (failures - 1))
                continue
            raise self._status_error(call, status, body)

    async def _attempt(
        self, call: _Call, stream: bool
    ) -> httpx.Response | tuple[int, httpx.Headers, bytes]:
        """One try: the response if it is wanted, else (status, headers, error body)."""
        request = self._client.build_request(
            call.method,
            call.url,
            params=call.params,
            json=call.json,
            content=call.content,
            headers=call.headers,
            timeout=call.timeout,
        )
        response = await self._client.send(request, stream=True)
        wanted = response.is_success or response.status_code in call.accept
        try:
            if wanted and stream:
                return response
            if wanted:
                await response.aread()
                return response
            return response.status_code, response.headers, await _read_some(response)
        finally:
            if not (wanted and stream):
                await response.aclose()

    def _status_error(self, call: _Call, status: int, body: bytes) -> SandboxError:
        error = api_error(
            status,
            self._scrub(body.decode("utf-8", "replace")),
            scope=call.scope,
            what=call.what,
            subject=call.subject,
            workspace=self.workspace,
            project=self.project,
        )
        if status >= 500 and not call.idempotent:
            return OutcomeUnknown(str(error))
        return error

    def _transport_error(self, call: _Call, exc: httpx.TransportError) -> SandboxError:
        if _never_sent(exc):
            return SandboxError(
                f"cannot reach the Buddy API at {self.base_url} ({_describe(exc)}); check the "
                "network and BUDDY_API_URL / BUDDY_REGION."
            )
        if isinstance(exc, httpx.TimeoutException):
            limit = call.timeout.read
            within = f" within {limit:g} s" if limit else ""
            message = f"Buddy did not answer{within} while {call.what}; try again in a moment."
        else:
            message = (
                f"the connection to the Buddy API at {self.base_url} broke while {call.what} "
                f"({_describe(exc)}); try again in a moment."
            )
        return SandboxError(message) if call.idempotent else OutcomeUnknown(message)

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "[token]") if self._token else text


def _never_sent(exc: BaseException) -> bool:
    """Failures before a connection existed: the server saw nothing."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _read_some(response: httpx.Response) -> bytes:
    """At most ERROR_BODY_BYTES of an error body (a broken body is not worth an error)."""
    data = bytearray()
    with contextlib.suppress(httpx.HTTPError):
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) >= ERROR_BODY_BYTES:
                break
    return bytes(data[:ERROR_BODY_BYTES])
