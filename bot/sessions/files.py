"""Taking files into a sandbox: safe names, and the header line noted on the way through."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER_MAX_BYTES = 4096
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, taken: set[str]) -> str:
    """A plain file name: no folders, no control or shell characters, no clash with `taken`."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).strip("._") or "file"
    stem, dot, ext = base[:120].rpartition(".")
    stem, ext = (stem, f".{ext}") if dot and stem else (base[:120], "")
    candidate, n = stem + ext, 2
    while candidate in taken:
        candidate, n = f"{stem}-{n}{ext}", n + 1
    return candidate


@dataclass
class Tap:
    """Counts the bytes of a stream and keeps its first line, without holding the stream."""

    size: int = 0
    _head: bytearray = field(default_factory=bytearray)
    _digest: Any = field(default_factory=hashlib.sha256)

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.size += len(chunk)
            self._digest.update(chunk)
            if len(self._head) < HEADER_MAX_BYTES:
                self._head += chunk[: HEADER_MAX_BYTES - len(self._head)]
            yield chunk

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    @property
    def header(self) -> str:
        first = bytes(self._head).split(b"\n", 1)[0].rstrip(b"\r")
        if b"\x00" in first:
            return ""
        return first.decode("utf-8", errors="replace").lstrip("\ufeff")


FileOpener = Callable[[], AsyncIterator[bytes]]


@dataclass(frozen=True)
class Spooled:
    """A file held on the bot's local disk until its sandbox can take it."""

    path: Path
    size: int
    header: str
    sha256: str


async def spool(chunks: AsyncIterator[bytes], directory: Path) -> Spooled:
    """Stream `chunks` to a temporary file (never the whole file in memory)."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    fd, name = await asyncio.to_thread(tempfile.mkstemp, dir=directory, suffix=".part")
    path, tap = Path(name), Tap()
    try:
        with os.fdopen(fd, "wb") as handle:
            async for chunk in tap.through(chunks):
                await asyncio.to_thread(handle.write, chunk)
    except BaseException:
        await asyncio.to_thread(path.unlink, missing_ok=True)
        raise
    return Spooled(path, tap.size, tap.header, tap.sha256)


async def read_spool(spooled: Spooled, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(spooled.path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, chunk_size):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)
