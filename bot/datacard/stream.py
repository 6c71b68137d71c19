"""Cards for streams on an event loop: profiling on the way through, and gzip unpacking with
limits. The work runs in worker threads, a batch at a time, like bot.sessions.files.Tap."""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import AsyncIterator

from bot.datacard.card import DataCard
from bot.datacard.errors import CardError
from bot.datacard.kinds import unpacked_name
from bot.datacard.profiler import Profiler

BATCH = 1 << 20  # bytes handed to a worker thread at a time
GZIP_RATIO = 200  # unpacked bytes per packed byte beyond which a gzip file is a bomb
GZIP_SLACK = 8 << 20  # unpacked bytes always allowed, whatever the ratio (small files)
GZIP_MAX = 8 << 30
_OUT_STEP = 1 << 20  # unpacked bytes per decompress call: memory stays flat

log = logging.getLogger(__name__)


class CardTap:
    """Profiles a stream on its way through, in a worker thread, a batch behind, so that
    profiling overlaps the consumer's work (hashing, uploading) instead of adding to it.

    Either wrap the stream (`through`), or hand over batches the caller already gathers
    (`take`, e.g. from the batch a Tap hashes: no second copy, no extra stream layer).
    A failure of the profiler never stops the stream: the card is then None."""

    def __init__(self, name: str, kind: str | None = None, batch: int = BATCH) -> None:
        self.profiler = Profiler(name, kind)
        self.batch = batch
        self.failed = False
        self._running: asyncio.Future[None] | None = None

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in chunks:
                parts.append(chunk)
                size += len(chunk)
                if size >= self.batch:
                    await self.take(b"".join(parts))
                    parts, size = [], 0
                yield chunk
            await self.take(b"".join(parts))
            await self._wait()
        finally:
            if self._running is not None and not self._running.done():
                self._running.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def card(self) -> DataCard | None:
        await self._wait()
        if self.failed:
            return None
        try:
            return await asyncio.to_thread(self.profiler.finish)
        except Exception:
            log.exception("Profiling %s failed", self.profiler.name)
            return None

    async def take(self, data: bytes) -> None:
        """Start profiling `data`, the stream's next bytes; returns once the previous batch
        is done (batches go in order, one at a time), not waiting for this one."""
        await self._wait()
        if data and not self.failed:
            self._running = asyncio.ensure_future(asyncio.to_thread(self._safe_feed, data))

    async def _wait(self) -> None:
        if self._running is not None:
            await self._running
            self._running = None

    def _safe_feed(self, data: bytes) -> None:
        try:
            self.profiler.feed(data)
        except Exception:
            log.exception("Profiling %s failed", self.profiler.name)
            self.failed = True


async def gunzip(
    chunks: AsyncIterator[bytes],
    name: str,
    max_ratio: int = GZIP_RATIO,
    max_bytes: int = GZIP_MAX,
    batch: int = 256 << 10,
) -> AsyncIterator[bytes]:
    """The unpacked bytes of a gzip stream (several members allowed), a megabyte at a time.
    Raises CardError, before unpacking much, when the stream expands more than `max_ratio`
    times (a gzip bomb), unpacks to more than `max_bytes`, or is not valid gzip."""
    unpack = _Gunzip(name, max_ratio, max_bytes)
    pending: list[bytes] = []
    size = 0
    async for chunk in chunks:
        pending.append(chunk)
        size += len(chunk)
        if size >= batch:
            async for out in unpack.run(b"".join(pending)):
                yield out
            pending, size = [], 0
    async for out in unpack.run(b"".join(pending)):
        yield out
    unpack.check_end()


class _Gunzip:
    def __init__(self, name: str, max_ratio: int, max_bytes: int) -> None:
        self.name, self.max_ratio, self.max_bytes = name, max_ratio, max_bytes
        # A name that hides the gzip is told so: the person may not know it is packed.
        self.it = "it" if unpacked_name(name) != name else "it is gzip-compressed and"
        self.unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.packed = self.unpacked = 0
        self.trailing = False  # bytes after the last member that are not gzip: ignored
        self.in_member = False  # the current member has started and not ended

    async def run(self, data: bytes) -> AsyncIterator[bytes]:
        while data and not self.trailing:
            left = len(data)
            try:
                out = await asyncio.to_thread(self.unpacker.decompress, data, _OUT_STEP)
            except zlib.error as error:
                why = f"it is not valid gzip data ({error})"
                raise CardError(f"Skipped {self.name}: {why}.") from None
            self.in_member = True
            data = self._next_input()
            self.packed += left - len(data)  # what the ratio is measured against: read input
            self.unpacked += len(out)
            self._check()
            if out:
                yield out

    def _next_input(self) -> bytes:
        if not self.unpacker.eof:
            return self.unpacker.unconsumed_tail
        rest = self.unpacker.unused_data
        if rest and not rest.startswith(b"\x1f\x8b"):
            self.trailing = True
            return b""
        self.unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.in_member = False
        return rest

    def _check(self) -> None:
        if self.unpacked > self.max_bytes:
            limit = self.max_bytes / 2**30
            raise CardError(f"Skipped {self.name}: {self.it} unpacks to more than {limit:g} GB.")
        if self.unpacked > self.max_ratio * self.packed + GZIP_SLACK:
            raise CardError(
                f"Skipped {self.name}: {self.it} expands more than {self.max_ratio} times when "
                "unpacked, which is what a gzip bomb does."
            )

    def check_end(self) -> None:
        if not self.packed and not self.trailing:
            raise CardError(f"Skipped {self.name}: it is empty, not gzip data.")
        if self.in_member and not self.unpacker.eof:
            raise CardError(f"Skipped {self.name}: its gzip data ends early (cut short?).")
