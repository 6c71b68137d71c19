"""Files in one Buddy sandbox: listing (`content/`), streamed multipart uploads with their
parent folders made first (`content/upload/`), and streamed downloads (`download/`)."""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import AsyncIterator
from typing import Any

from bot.errors import SandboxError
from bot.sandbox.base import WORK_DIR
from bot.sandbox.buddy.errors import StreamInterrupted
from bot.sandbox.buddy.http import BuddyHttp
from bot.sandbox.buddy.retries import READ_ATTEMPTS
from bot.sandbox.buddy.scripts import clear_way_script
from bot.sandbox.buddy.views import check_is_file
from bot.sandbox.buddy.wire import (
    encode_path,
    multipart_body,
    multipart_boundary,
    multipart_content_type,
)
from bot.sandbox.output import last_line


class BuddyFiles:
    """The file calls of one sandbox, on paths already checked by `sandbox_path`. Errors
    are the HTTP layer's; telling a missing path from a vanished sandbox is the caller's."""

    def __init__(self, http: BuddyHttp, sandbox_id: str, *, retry_base_delay_s: float) -> None:
        self._http = http
        self._sandbox_id = sandbox_id
        self._retry_base_delay_s = retry_base_delay_s
        self._dirs: set[str] = set()  # folders known to exist (upload parents)

    async def contents(self, target: str, shown: str) -> list[Any]:
        """The items of a `content/` answer (for `parse_listing`)."""
        response = await self._http.request(
            "GET",
            self._url("content", target),
            scope="path",
            subject=shown,
            what=f"listing {shown}",
            idempotent=True,
        )
        contents = self._http.json_of(response, f"listing {shown}").get("contents")
        return contents if isinstance(contents, list) else []

    async def upload(self, target: str, shown: str, chunks: AsyncIterator[bytes]) -> int:
        """Stream `chunks` into `target`; the number of bytes sent."""
        await self._clear_way(target, shown)
        await self._make_parents(target)
        counter = _Counter()
        boundary = multipart_boundary()
        body = multipart_body(posixpath.basename(target), counter.through(chunks), boundary)
        try:
            await self._http.request(
                "POST",
                self._url("content", "upload", target),
                content=body,
                headers={"Content-Type": multipart_content_type(boundary)},
                timing="stream",
                replayable=False,  # the chunks cannot be read twice
                scope="path",
                subject=shown,
                what=f"uploading {shown}",
            )
        except BaseException:
            self._dirs.clear()  # a folder may have been removed since it was checked
            raise
        return counter.total

    async def download(self, target: str, shown: str) -> AsyncIterator[bytes]:
        """Stream a file; a connection that breaks before the first byte is reopened."""
        what = f"downloading {shown}"
        for attempt in range(READ_ATTEMPTS):
            sent = 0
            try:
                async with self._http.stream(
                    self._url("download", target), scope="path", subject=shown, what=what
                ) as response:
                    check_is_file(response.headers, target, shown)
                    async for chunk in self._http.chunks(response, what):
                        sent += len(chunk)
                        yield chunk
                return
            except StreamInterrupted:
                if sent or attempt == READ_ATTEMPTS - 1:
                    raise
            await asyncio.sleep(self._retry_base_delay_s * 2**attempt)

    async def _clear_way(self, target: str, shown: str) -> None:
        """Remove the links model code may have left where the upload goes (a sync exec:
        one request, and the bot's own command, outside model code's namespace)."""
        what = f"checking the way to {shown}"
        response = await self._http.request(
            "POST",
            self._http.sandbox_url(self._sandbox_id, "exec"),
            json={"command": clear_way_script(target), "runtime": "BASH"},
            timing="command",
            idempotent=True,  # it only removes links, again and again if need be
            scope="sandbox",
            what=what,
        )
        result = self._http.json_of(response, what)
        if result.get("exit_code") != 0:
            raise SandboxError(f"{what} failed: {last_line(str(result.get('stderr') or ''))}")
        if "removed" in str(result.get("stdout")):
            self._dirs.clear()  # a folder known to exist was a link, now gone

    def _url(self, *parts: str) -> str:
        """A file endpoint's URL; the last part is a sandbox path."""
        *endpoint, path = parts
        return self._http.sandbox_url(self._sandbox_id, *endpoint, encode_path(path))

    async def _make_parents(self, target: str) -> None:
        """Create the folders between /buddy/work and `target`, top down (409: exists)."""
        relative = posixpath.relpath(posixpath.dirname(target), WORK_DIR)
        folder = WORK_DIR
        for part in [] if relative == "." else relative.split("/"):
            folder = f"{folder}/{part}"
            if folder in self._dirs:
                continue
            await self._http.request(
                "POST",
                self._url("content", folder),
                json={},
                accept=(409,),
                idempotent=True,  # a repeat answers 409, which is success here
                scope="path",
                subject=folder,
                what=f"creating folder {folder}",
            )
            self._dirs.add(folder)


class _Counter:
    """Counts the bytes of an upload as they stream through."""

    def __init__(self) -> None:
        self.total = 0

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.total += len(chunk)
            yield chunk
