"""HTTP layer of the Buddy.Works sandbox backend.

One `httpx.AsyncClient` per provider, Buddy's URL layout, the retry policy, the wire
formats (JSONL command logs, multipart uploads) and, in one place, the mapping of every
Buddy answer or network failure to a project error whose message says what to do.

Retries follow the official Python SDK: idempotent reads are retried on 5xx, timeouts and
network errors; 429 is waited out for any request whose body can be sent again; creating a
sandbox, posting a command, uploading and deleting are never retried blindly. A request
that could not even connect was never sent, so resending it is always safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Literal
from urllib.parse import quote

import httpx

from bot.errors import SandboxConfigError, SandboxError, SandboxGone, SandboxUnavailable
from bot.sandbox.base import path_missing
from bot.sandbox.output import CappedBuffer

REGION_URLS = {
    "US": "https://api.buddy.works",
    "EU": "https://api.eu.buddy.works",
    "AS": "https://api.asia.buddy.works",
    "AP": "https://api.asia.buddy.works",  # the Asia region's code in older SDKs
}

REQUEST_TIMEOUT_S = 30.0  # the wait for an ordinary answer; the others derive from it
READ_ATTEMPTS = 4  # sleeping base, 2 x base, 4 x base between them
RATE_LIMIT_WAITS = 3
RATE_LIMIT_MAX_WAIT_S = 60.0
ERROR_BODY_BYTES = 64 * 1024
MESSAGE_MAX_CHARS = 300
MAX_LOG_LINE_BYTES = 4 << 20  # one JSONL record; longer ones are skipped and counted as cut

GONE_MESSAGE = (
    "the sandbox no longer exists (deleted or timed out); the next message starts a fresh one"
)
SCOPE_HINT = (
    "give BUDDY_TOKEN the scopes WORKSPACE, SANDBOX_READ and SANDBOX_WRITE "
    "(SANDBOX_INFO and SANDBOX_MANAGE in older Buddy versions) and access to the project"
)

# How long a request may take, by kind (see `request_timeouts`).
TimeoutKind = Literal["default", "create", "command", "stream"]

# What a request is about decides what a 404 means.
#   project: a workspace/project-level call (404: unknown workspace or project)
#   sandbox: a call on one sandbox (404: the sandbox is gone)
#   command: a call on one command (404: no such command, or the sandbox is gone)
#   path:    a file call (404: no such path, or the sandbox is gone)
Scope = Literal["project", "sandbox", "command", "path"]

_QUOTA_RE = re.compile(
    r"quota|maximum number|too many sandboxes|\blimits?\b.{0,40}\b(reached|exceeded)"
    r"|\b(reached|exceeded)\b.{0,40}\blimits?\b",
    re.IGNORECASE,
)
_PATH_MISSING_RE = re.compile(
    r"not (found|find|exist)|no such (file|dir)|does not exist|doesn't exist", re.IGNORECASE
)


class OutcomeUnknown(SandboxError):
    """A request that must not be resent failed in a way that hides whether it took effect."""


class CommandNotFound(SandboxError):
    """Buddy does not know the command (or, it turns out, the sandbox)."""


class StreamInterrupted(SandboxError):
    """A streamed answer (logs, download) broke off after it had started."""


def api_url_for(api_url: str | None, region: str) -> str:
    """BUDDY_API_URL if set, else the region's URL (US, EU, AS; AP is an alias of AS)."""
    if api_url:
        return api_url.rstrip("/")
    try:
        return REGION_URLS[region.upper()]
    except KeyError:
        raise SandboxConfigError(
            f"Configuration error: BUDDY_REGION {region!r} is not one of US, EU, AS. "
            "Set BUDDY_REGION, or BUDDY_API_URL for a self-hosted Buddy."
        ) from None


def request_timeouts(base_s: float = REQUEST_TIMEOUT_S) -> dict[TimeoutKind, httpx.Timeout]:
    """httpx timeouts by kind of request, from the wait for an ordinary answer."""
    return {
        "default": httpx.Timeout(base_s),
        "create": httpx.Timeout(2 * base_s, connect=base_s),
        # Buddy holds a command's POST while the sandbox boots
        "command": httpx.Timeout(4 * base_s, connect=base_s),
        # followed logs, downloads and uploads last as long as the data does; only
        # connecting and waiting for a pooled connection are bounded
        "stream": httpx.Timeout(None, connect=base_s, pool=base_s),
    }


def encode_path(path: str) -> str:
    """A sandbox path as a URL path tail: no leading '/', each segment percent-encoded."""
    return "/".join(quote(segment, safe="") for segment in path.lstrip("/").split("/"))


# -- error mapping: the one place that turns Buddy's answers into project errors --


def error_text(body: bytes | str) -> str:
    """The human part of an error body: Buddy's `errors[].message`, other JSON's strings, or
    the first line of plain text (HTML pages from gateways are dropped)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        line = text.splitlines()[0].strip() if text and not text.startswith("<") else ""
        return line[:MESSAGE_MAX_CHARS]
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        items = [e.get("message") if isinstance(e, dict) else e for e in data["errors"]]
        messages = [m for m in items if isinstance(m, str)]
    else:
        messages = _strings(data)
    return "; ".join(m.strip() for m in messages if m.strip())[:MESSAGE_MAX_CHARS]


def _strings(data: Any, limit: int = 5) -> list[str]:
    """Up to `limit` string values found anywhere in a JSON document."""
    if isinstance(data, str):
        return [data]
    values = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    found: list[str] = []
    for value in values:
        found += _strings(value, limit - len(found))
        if len(found) >= limit:
            break
    return found[:limit]


def api_error(
    status: int,
    body: bytes | str,
    *,
    scope: Scope,
    what: str,
    subject: str = "",
    workspace: str = "",
    project: str | None = None,
) -> SandboxError:
    """The project error for an unsuccessful answer. `what` names the action ("creating a
    sandbox"); `subject` is the path or command id for path and command scopes."""
    message = error_text(body)
    said = f" (HTTP {status}: {message})" if message else f" (HTTP {status})"
    if status == 401:
        return SandboxConfigError(
            f"Buddy rejected the API token{said}: it is wrong or has expired. Check BUDDY_TOKEN."
        )
    if status == 429:
        return SandboxError(
            f"Buddy is rate limiting this token{said} while {what}; wait a minute and try "
            "again, or ask Buddy support to raise the limit."
        )
    if 400 <= status < 500 and _QUOTA_RE.search(message) and "rate" not in message.lower():
        return SandboxUnavailable(
            f"Buddy's sandbox quota is reached{said}: delete unused sandboxes or ask Buddy "
            "to raise the limit."
        )
    if status == 403:
        if "api is disabled" in message.lower():
            return SandboxConfigError(
                f"The Buddy API is disabled in workspace {workspace!r}{said}: enable the "
                "developer API in the workspace settings."
            )
        return SandboxConfigError(
            f"Buddy refused {what}{said}: the token lacks a scope or permission; {SCOPE_HINT}."
        )
    if status == 404 or (status == 400 and "invalid url" in message.lower()):
        return _not_found(scope, said, subject, workspace, project)
    if status == 400 and scope == "path" and _PATH_MISSING_RE.search(message):
        return path_missing(subject)
    if status == 400 and "not running" in message.lower():
        return SandboxUnavailable(
            f"the sandbox is not running{said}; Buddy stops a sandbox after "
            "BUDDY_SANDBOX_TIMEOUT seconds without activity. Try again in a moment."
        )
    if status >= 500:
        return SandboxError(f"Buddy server error while {what}{said}; try again in a moment.")
    return SandboxError(f"Buddy rejected {what}{said}.")


def _not_found(
    scope: Scope, said: str, subject: str, workspace: str, project: str | None
) -> SandboxError:
    if scope == "sandbox":
        return SandboxGone(GONE_MESSAGE)
    if scope == "command":
        return CommandNotFound(f"no such command {subject!r} in this sandbox")
    if scope == "path":
        return path_missing(subject)
    where = f"workspace {workspace!r}" + (f" or project {project!r}" if project else "")
    return SandboxConfigError(
        f"Buddy does not know {where}{said}. Check BUDDY_WORKSPACE (the part after "
        "app.buddy.works/ in the workspace's address) and BUDDY_PROJECT."
    )


def retry_delay(headers: Mapping[str, str], fallback: float, *, now: float | None = None) -> float:
    """Seconds to wait after a 429: `Retry-After` (seconds or an HTTP date), else
    `X-Rate-Limit-Reset` (Unix seconds), else `fallback`; capped at RATE_LIMIT_MAX_WAIT_S."""
    headers = httpx.Headers(headers)
    now = time.time() if now is None else now
    delay = _header_delay(headers.get("retry-after"), headers.get("x-rate-limit-reset"), now)
    return min(max(fallback if delay is None else delay, 0.0), RATE_LIMIT_MAX_WAIT_S)


def _header_delay(retry_after: str | None, reset: str | None, now: float) -> float | None:
    if retry_after:
        with contextlib.suppress(ValueError):
            return float(retry_after)
        with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
            return parsedate_to_datetime(retry_after).timestamp() - now
    if reset:
        with contextlib.suppress(ValueError):
            at = float(reset)
            return (at / 1000 if at > 1e11 else at) - now  # tolerate milliseconds
    return None


# -- wire formats --


class LogParser:
    """Feeds Buddy's JSONL command log (`{"type": "STDOUT"|"STDERR", "data": ...}` per line)
    into two capped buffers.

    Splits on b"\\n" only (a JSON string may hold U+2028, which `splitlines` would split on);
    a line is decoded once it is complete, so a chunk boundary inside a UTF-8 character is
    harmless. A line that arrives whole in one chunk is parsed whatever its size; an
    unfinished line is held up to `max_line` bytes, then the start of its `data` is kept and
    the rest of the line is counted as cut from the stream its start names.
    """

    def __init__(
        self, stdout: CappedBuffer, stderr: CappedBuffer, max_line: int = MAX_LOG_LINE_BYTES
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self._max_line = max_line
        self._pending = bytearray()
        self._skipping: CappedBuffer | None = None
        self._skipped = 0
        self.bad_lines = 0

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            self._end_line()
            start = end + 1
        self._add(chunk[start:])
        if len(self._pending) > self._max_line:
            self._give_up_line()

    def close(self) -> None:
        """End of stream: a last line without its newline still counts."""
        self._end_line()

    def _add(self, piece: bytes) -> None:
        if self._skipping is not None:
            self._skipped += len(piece)
            return
        self._pending += piece

    def _give_up_line(self) -> None:
        """Keep what can be read of an overlong line; count the rest of it as cut."""
        pending, self._pending = bytes(self._pending), bytearray()
        self._skipping = self._stream_named_in(pending[:256])
        start = _salvage(pending)
        self._skipping.write(start.encode("utf-8", "replace"))
        self._skipped = 0 if start else len(pending)

    def _end_line(self) -> None:
        if self._skipping is not None:
            # CappedBuffer counts cut bytes as total minus what it kept.
            self._skipping.total += self._skipped
            self._skipping.write(b"\n")
            self._skipping, self._skipped = None, 0
            return
        line, self._pending = bytes(self._pending), bytearray()
        if line.strip():
            self._record(line)

    def _record(self, line: bytes) -> None:
        try:
            record = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            record = None
        if not isinstance(record, dict):
            self.bad_lines += 1
            return
        data = record.get("data")
        text = "" if data is None else data if isinstance(data, str) else json.dumps(data)
        target = self.stderr if str(record.get("type", "")).upper() == "STDERR" else self.stdout
        target.write((text + "\n").encode("utf-8", "replace"))

    def _stream_named_in(self, head: bytes) -> CappedBuffer:
        match = re.search(rb'"type"\s*:\s*"(\w+)"', head)
        return self.stderr if match and match.group(1).upper() == b"STDERR" else self.stdout


_DATA_START_RE = re.compile(rb'"data"\s*:\s*"')


def _salvage(pending: bytes) -> str:
    """The decoded start of the `data` string of a line cut short ("" if there is none)."""
    match = _DATA_START_RE.search(pending)
    if match is None:
        return ""
    raw = pending[match.end() :].decode("utf-8", "ignore")
    for trim in range(7):  # drop a partial escape such as a lone backslash or "\\u12"
        with contextlib.suppress(ValueError):
            return str(json.loads(f'"{raw[: len(raw) - trim]}"'))
    return ""


def multipart_boundary() -> str:
    return "buddy-" + secrets.token_hex(16)


def multipart_content_type(boundary: str) -> str:
    return f"multipart/form-data; boundary={boundary}"


async def multipart_body(
    filename: str, chunks: AsyncIterator[bytes], boundary: str
) -> AsyncIterator[bytes]:
    """One `file` part around `chunks`, streamed: the file is never held in memory."""
    safe = filename.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
    yield (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{safe}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    async for chunk in chunks:
        if chunk:
            yield bytes(chunk)
    yield f"\r\n--{boundary}--\r\n".encode()


# -- the client --


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


__all__ = [
    "BuddyHttp",
    "CommandNotFound",
    "LogParser",
    "OutcomeUnknown",
    "StreamInterrupted",
    "api_error",
    "api_url_for",
    "encode_path",
    "error_text",
    "multipart_body",
    "request_timeouts",
    "retry_delay",
]
