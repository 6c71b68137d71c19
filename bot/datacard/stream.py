"""Cards for streams on an event loop: profiling on the way through, and gzip unpacking with
limits. The work runs in worker threads, a batch at a time, like bot.sessions.files.Tap."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from bot.datacard import budget
from bot.datacard.budget import OverBudget
from bot.datacard.card import DataCard
from bot.datacard.errors import CardError
from bot.datacard.kinds import unpacked_name
from bot.datacard.profiler import Profiler
from bot.datacard.whole import given_up

T = TypeVar("T")
BATCH = 1 << 20  # bytes handed to a worker thread at a time
GZIP_RATIO = 200  # unpacked bytes per packed byte beyond which a gzip file is a bomb
GZIP_SLACK = 8 << 20  # unpacked bytes always allowed, whatever the ratio (small files)
GZIP_MAX = 8 << 30
QUEUE_FLOOR = 1.0  # seconds a batch may always wait for a thread
SECONDS_PER_MB = 1.0  # a card's budget grows with its file (plain CSV: ~0.02 s per MB)
_OUT_STEP = 1 << 20  # unpacked bytes per decompress call: memory stays flat
_IN_STEP = 64 << 10  # packed bytes per decompress call
# Members of a gzip stream: tools that write many (bgzip, pigz) make one per 64 KB or so.
MAX_MEMBERS = 1000
MEMBER_BYTES = 4096  # one more member allowed per this many packed bytes

log = logging.getLogger(__name__)


class CardTap:
    """Profiles a stream on its way through, in the cards' own threads, a batch behind, so
    that profiling overlaps the consumer's work (hashing, uploading) instead of adding to it.

    Either wrap the stream (`through`), or hand over batches the caller already gathers
    (`take`, e.g. from the batch a Tap hashes: no second copy, no extra stream layer).
    A failure of the profiler never stops the stream: the card is then None. Its batches
    may spend `seconds` (CARD_SECONDS), plus SECONDS_PER_MB a megabyte, in the cards' pool
    (profiled or waiting for a thread); past that, profiling stops and the card says so."""

    def __init__(
        self,
        name: str,
        kind: str | None = None,
        batch: int = BATCH,
        seconds: float | None = None,
    ) -> None:
        self.profiler = Profiler(name, kind)
        self.batch = batch
        self.failed = False
        self.seconds = self.left = budget.CARD_SECONDS if seconds is None else seconds
        self.over: OverBudget | None = None
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
        if self.over is None:
            try:
                return await self._held(self.profiler.finish)
            except OverBudget as over:
                self.over = over
            except Exception:
                log.exception("Profiling %s failed", self.profiler.name)
                return None
        name, kind = self.profiler.name, self.profiler.kind or "csv"
        return given_up(name, kind, OverBudget(round(self.seconds, 2), self.over.started))

    async def take(self, data: bytes) -> None:
        """Start profiling `data`, the stream's next bytes; returns once the previous batch
        is done (batches go in order, one at a time), not waiting for this one."""
        await self._wait()
        more = SECONDS_PER_MB * len(data) / (1 << 20)
        self.seconds, self.left = self.seconds + more, self.left + more
        if data and not self.failed and self.over is None:
            self._running = asyncio.ensure_future(self._held(self._safe_feed, data))

    async def _held(self, work: Callable[..., T], *args: Any) -> T:
        """`work` in the cards' pool, the time the stream waits for it counted."""
        start = time.monotonic()
        try:
            wait = max(self.left, QUEUE_FLOOR)  # a thread takes a moment to start
            return await budget.run(work, *args, seconds=self.left, queue_seconds=wait)
        finally:
            self.left -= time.monotonic() - start

    async def _wait(self) -> None:
        if self._running is not None:
            running, self._running = self._running, None
            try:
                await running
            except OverBudget as over:
                self.over = over

    def _safe_feed(self, data: bytes) -> None:
        try:
            self.profiler.feed(data)
        except OverBudget as over:
            self.over = over
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
        self.members = 1
        self.trailing = False  # bytes after the last member that are not gzip: ignored
        self.in_member = False  # the current member has started and not ended

    async def run(self, data: bytes) -> AsyncIterator[bytes]:
        view = memoryview(data)
        while view and not self.trailing:
            try:
                outs, used = await asyncio.to_thread(self._step, view)
            except zlib.error as error:
                why = f"it is not valid gzip data ({error})"
                raise CardError(f"Skipped {self.name}: {why}.") from None
            view = view[used:]
            for out in outs:
                yield out

    def _step(self, data: memoryview) -> tuple[list[bytes], int]:
        """Unpack from the start of `data`, member after member, until about _OUT_STEP
        bytes come out: (what came out, the bytes of `data` used). Input goes in slices of
        _IN_STEP, so what zlib copies at the end of each member is small, however many."""
        outs, made, pos = [], 0, 0
        while pos < len(data) and made < _OUT_STEP and not self.trailing:
            piece = data[pos : pos + _IN_STEP]
            out = self.unpacker.decompress(piece, _OUT_STEP - made)
            used = len(piece) - len(self.unpacker.unconsumed_tail)
            if self.unpacker.eof:
                used -= len(self.unpacker.unused_data)
            pos, self.packed, self.in_member = pos + used, self.packed + used, True
            self.unpacked, made = self.unpacked + len(out), made + len(out)
            outs += [out] if out else []
            self._check()
            if self.unpacker.eof:
                self._next_member(bytes(data[pos : pos + 2]))
        return outs, pos

    def _next_member(self, head: bytes) -> None:
        if head and not b"\x1f\x8b".startswith(head):
            self.trailing = True
            return
        self.members += 1
        if self.members > MAX_MEMBERS + self.packed // MEMBER_BYTES:
            raise CardError(
                f"Skipped {self.name}: {self.it} is made of over {self.members - 1:,} "
                "gzip members, far more than a gzip tool makes."
            )
        self.unpacker = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.in_member = False

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
