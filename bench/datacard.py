"""Benchmark: what the data card costs on file intake.

Run from the repository root: `.venv/bin/python -m bench.datacard [--sizes 10,100,1000]`.

For each size (MB of 10^6 bytes) of generated CSV (the rows of bench.file_intake, held in
memory once and fed in 64 KB chunks, as a download arrives):

* profile: `Profiler.feed` alone, a megabyte at a time, in this thread (MB/s of wall time).
* against hashing: the stream through `bot.sessions.files.Tap` (SHA-256 off the event loop,
  as intake does), without the card ("plain") and with it, attached two ways: "layer",
  `CardTap.through` as one more stream layer in front of Tap; "shared", the card taking the
  very batches Tap hashes (`CardTap.take`, as an integration into Tap would). The ratio is
  the plain time over the time with the card (target >= 0.8).
* against spooling: `bot.sessions.files.spool` (hash and write to local disk, what intake
  does while a sandbox boots) without and with `CardTap.through`.
* memory: the peak of Python allocations (tracemalloc) during a "shared" intake, above
  where it started (target < 64 MB, flat across sizes).
* tokens: characters / 4 of the file's `for_model()` text.

Times are medians of `--reps` runs (3 at 1 GB), the cases taking turns to go first. Every
figure is wall time on a shared 2-core machine: read ratios within a run.
Also: a CSV with every field quoted, the slowest kind to scan.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from bench import CSV_HEADER, csv_rows
from bot.datacard import CardTap, Profiler
from bot.datacard.render import for_model
from bot.sessions.files import Tap, spool

MB = 10**6
CHUNK = 64 << 10
TARGET_RATIO = 0.8
TARGET_GROWTH_MB = 64
HOWS = ("plain", "layer", "shared", "spool", "spool+card")


class Csv:
    """`size` bytes of CSV: a header, then 16 distinct blocks of rows in turn."""

    def __init__(self, size: int, quoted: bool = False) -> None:
        self.header = CSV_HEADER
        self.blocks = [csv_rows(i * 20_000, 20_000, quoted) for i in range(16)]
        self.size = size

    def chunks(self) -> Iterator[bytes]:
        left = self.size - len(self.header)
        yield self.header
        for n in range(1 << 30):
            block = self.blocks[n % 16]
            for i in range(0, len(block), CHUNK):
                piece = block[i : i + CHUNK][:left]
                left -= len(piece)
                yield piece
                if not left:
                    return

    async def stream(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks():
            yield chunk


def profile_speed(csv: Csv) -> tuple[float, str]:
    profiler, batch, size = Profiler("generated.csv"), [], 0
    started = time.perf_counter()
    for chunk in csv.chunks():
        batch.append(chunk)
        size += len(chunk)
        if size >= 1 << 20:
            profiler.feed(b"".join(batch))
            batch, size = [], 0
    profiler.feed(b"".join(batch))
    card = profiler.finish()
    return csv.size / MB / (time.perf_counter() - started), for_model(card)


class SharedTap(Tap):
    """Tap with the card fed the batches it hashes, hashing and profiling side by side."""

    def __init__(self, card: CardTap) -> None:
        super().__init__()
        self.card = card

    async def _hash(self) -> None:
        data, self._pending = bytes(self._pending), bytearray()
        await asyncio.gather(asyncio.to_thread(self._digest.update, data), self.card.take(data))


async def intake(csv: Csv, how: str, folder: Path) -> float:
    started = time.perf_counter()
    stream, card = csv.stream(), CardTap("generated.csv")
    if how in ("layer", "spool+card"):
        stream = card.through(stream)
    if how.startswith("spool"):
        spooled = await spool(stream, folder)
        await asyncio.to_thread(spooled.path.unlink)
    else:
        async for _ in (SharedTap(card) if how == "shared" else Tap()).through(stream):
            pass
    if how not in ("plain", "spool"):
        assert await card.card() is not None
    return time.perf_counter() - started


def intake_speeds(csv: Csv, reps: int, folder: Path) -> dict[str, float]:
    """MB/s of intake for each way in HOWS."""
    times: dict[str, list[float]] = {how: [] for how in HOWS}
    for rep in range(reps):
        for how in HOWS[rep % len(HOWS) :] + HOWS[: rep % len(HOWS)]:
            gc.collect()
            times[how].append(asyncio.run(intake(csv, how, folder)))
    return {how: csv.size / MB / statistics.median(t) for how, t in times.items()}


def memory_growth(csv: Csv, folder: Path) -> float:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    asyncio.run(intake(csv, "shared", folder))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / MB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="MB of CSV, comma-separated")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(
        f"{'MB/s (ratio)':<19}{'profile':>8}{'plain':>7}{'layer':>13}{'shared':>13}"
        f"{'spool':>7}{'spool+card':>13}{'memory':>9}{'tokens':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for quoted in (False, True):
            for mb in (int(s) for s in args.sizes.split(",")):
                if quoted and mb > 100:
                    continue
                csv = Csv(mb * MB, quoted)
                speed, text = profile_speed(csv)
                s = intake_speeds(csv, args.reps if mb < 1000 else 3, Path(tmp))
                growth = memory_growth(csv, Path(tmp))
                name = f"{mb} MB {'quoted' if quoted else 'plain'}"
                layer, shared = s["layer"] / s["plain"], s["shared"] / s["plain"]
                spooled = s["spool+card"] / s["spool"]
                print(
                    f"{name:<19}{speed:>8.0f}{s['plain']:>7.0f}"
                    f"{s['layer']:>7.0f} ({layer:.2f}){s['shared']:>7.0f} ({shared:.2f})"
                    f"{s['spool']:>7.0f}{s['spool+card']:>7.0f} ({spooled:.2f})"
                    f"{growth:>6.1f} MB{len(text) // 4:>7}",
                    flush=True,
                )
    print(f"targets: ratio >= {TARGET_RATIO}, memory growth < {TARGET_GROWTH_MB} MB, flat")


if __name__ == "__main__":
    main()
