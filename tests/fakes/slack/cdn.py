"""The fake Slack's file CDN: Slack answers an authorised ``url_private_download`` with a
302 to another host (slack-platform.md §4, observed), which serves the bytes to anyone
holding the short-lived signed link. It runs on 127.0.0.2, another origin than the Web API's
127.0.0.1, so a client following the redirect drops ``Authorization`` as it would for
Slack's real CDN, and a client that sends it anyway is seen doing so (``tokens_seen``).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import quote

from aiohttp import web

from tests.fakes.loopback import serve

CDN_HOST = "127.0.0.2"
LINK_LIFETIME_S = 60.0
CHUNK = 64 * 1024


@dataclass(frozen=True)
class _Link:
    name: str
    mimetype: str
    content: bytes
    expires: float


class FakeCdn:
    """An async context manager; ``link`` makes a signed URL for some bytes."""

    def __init__(self) -> None:
        self.base_url = ""
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization sent)
        self._links: dict[str, _Link] = {}
        self.gate: asyncio.Event | None = None  # downloads wait until it is set: a slow CDN
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeCdn:
        app = web.Application()
        app.router.add_get("/files-edge/{sig}/{name}", self._get)
        self._runner, self.base_url = await serve(app, host=CDN_HOST)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def tokens_seen(self) -> list[str]:
        """Every Authorization header the CDN was sent (none should be)."""
        return [auth for _, auth in self.requests if auth]

    def link(self, name: str, mimetype: str, content: bytes) -> str:
        sig = secrets.token_urlsafe(16)
        expires = time.monotonic() + LINK_LIFETIME_S
        self._links[sig] = _Link(name, mimetype, content, expires)
        return f"{self.base_url}/files-edge/{sig}/{quote(name, safe='')}"

    async def _get(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, request.headers.get("Authorization")))
        link = self._links.get(request.match_info["sig"])
        if link is None or link.expires < time.monotonic():
            return web.Response(status=403, text="<h1>Access denied</h1>", content_type="text/html")
        if self.gate is not None:
            await self.gate.wait()
        response = web.StreamResponse(
            headers={
                "Content-Type": link.mimetype,
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(link.name)}",
            }
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        for chunk in chunks(link.content, CHUNK):
            await response.write(chunk)
        await response.write_eof()
        return response


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
