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

from bot.datacard import CardTap, DataCard
from bot.errors import BotError

HEADER_MAX_BYTES = 4096
SPOOL_BATCH = 1 << 20  # bytes handed to a worker thread at a time
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, taken: set[str]) -> str:
    """A plain file name: no folders, no control or shell characters, no clash with `taken`."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, ext = base.rpartition(".")
    if not dot:
        stem, ext = base, ""
    stem = _UNSAFE.sub("_", stem).strip("._-")[:100] or "file"
    ext = _UNSAFE.sub("", ext)[:12]
    suffix = f".{ext}" if ext else ""
    candidate, n = stem + suffix, 2
    while candidate in taken:
        candidate, n = f"{stem}-{n}{suffix}", n + 1
    return candidate


@dataclass
class Tap:
    """Counts the bytes of a stream, keeps its first line, hashes it and (with `card`)
    profiles it, without holding the stream. Hashing and profiling happen off the event
    loop, side by side, a megabyte at a time."""

    card: CardTap | None = None
    size: int = 0
    _head: bytearray = field(default_factory=bytearray)
    _digest: hashlib._Hash = field(default_factory=hashlib.sha256)
    _pending: bytearray = field(default_factory=bytearray)

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.size += len(chunk)
            if len(self._head) < HEADER_MAX_BYTES:
                self._head += chunk[: HEADER_MAX_BYTES - len(self._head)]
            self._pending += chunk
            if len(self._pending) >= SPOOL_BATCH:
                await self._hash()
            yield chunk
        await self._hash()

    async def _hash(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        hashed = asyncio.to_thread(self._digest.update, data)  # releases the GIL when large
        if self.card is None:
            await hashed
        else:
            await asyncio.gather(hashed, self.card.take(data))

    async def cards(self) -> tuple[DataCard, ...]:
        """The stream's data card, once it has all passed (none if profiling failed)."""
        card = await self.card.card() if self.card is not None else None
        return (card,) if card is not None else ()

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
    cards: tuple[DataCard, ...] = ()


async def spool(
    chunks: AsyncIterator[bytes], directory: Path, card: CardTap | None = None
) -> Spooled:
    """Stream `chunks` to a temporary file (never the whole file in memory), written off the
    event loop a megabyte at a time: one thread hand-off per small network chunk would cost
    more than the copy itself."""
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    fd, name = await asyncio.to_thread(tempfile.mkstemp, dir=directory, suffix=".part")
    path, tap, batch = Path(name), Tap(card), bytearray()
    try:
        with os.fdopen(fd, "wb") as handle:
            async for chunk in tap.through(chunks):
                batch += chunk
                if len(batch) >= SPOOL_BATCH:
                    await asyncio.to_thread(handle.write, bytes(batch))
                    batch.clear()
            await asyncio.to_thread(handle.write, bytes(batch))
    except BaseException:
        await asyncio.to_thread(path.unlink, missing_ok=True)
        raise
    return Spooled(path, tap.size, tap.header, tap.sha256, await tap.cards())


async def read_spool(spooled: Spooled, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(spooled.path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, chunk_size):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)


class FileRejected(BotError):
    """A file refused before it is taken in (too big, too many); the message says why.
    What kind it is, its bytes tell later (`intake.prepare`)."""


async def checked(chunks: AsyncIterator[bytes], name: str, max_bytes: int) -> AsyncIterator[bytes]:
    """Pass a file through, refusing it once it is larger than `max_bytes`."""
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise FileRejected(f"Skipped {name}: it is larger than {max_bytes >> 20} MB.")
        yield chunk
