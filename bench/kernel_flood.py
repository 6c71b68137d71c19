"""Benchmark: event-loop lag while a kernel cell floods its channel to the bot.

Cell code can find the kernel's frame channel and write to it as fast as it can. For 10 s
(by default) cells do just that, one after another (each is cut off at the channel's cap
and the kernel is replaced), while a ticker task on the same event loop measures how late
its 10 ms sleeps wake up: another thread's work would see that lag. Two floods: frames
that look like the kernel's own (60 kB of output each), and tiny frames ("{}").

Run from the repository root: `.venv/bin/python -m bench.kernel_flood [--seconds 10]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench import percentile, sandbox_root
from bot.sandbox.base import SandboxSpec
from bot.sandbox.local import LocalProvider

TICK_S = 0.01
FLOOD = """
import gc, json, os, time
from sci_kernel_output import Frames
channel = next(o for o in gc.get_objects() if isinstance(o, Frames)).default
line = {line!r}
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    os.write(channel, line)
"""
LINES = {
    "kernel-like frames": b'{"t": "o", "d": "' + b"x" * 60000 + b'"}\n',
    "tiny frames": b"{}\n" * 20000,
}


async def ticker(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        before = time.monotonic()
        await asyncio.sleep(TICK_S)
        lags.append(time.monotonic() - before - TICK_S)


async def flood(seconds: float, line: bytes) -> tuple[list[float], int]:
    """The ticker's lags while cells flood for `seconds`, and how many cells were cut off."""
    with sandbox_root() as root:
        provider = LocalProvider(root)
        sandbox = await provider.create(SandboxSpec(session_key="flood"))
        await sandbox.run_code("python", "print('warm')", 60)
        lags: list[float] = []
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(lags, stop))
        end, cut = time.monotonic() + seconds, 0
        try:
            while (left := end - time.monotonic()) > 0:
                code = FLOOD.format(line=line, seconds=round(left, 2))
                result = await sandbox.run_code("python", code, seconds + 60)
                cut += result.status == "killed"
        finally:
            stop.set()
            await tick
            await sandbox.destroy()
            await provider.close()
        return lags, cut


async def main(seconds: float) -> None:
    for name, line in LINES.items():
        lags, cut = await flood(seconds, line)
        ms = [lag * 1000 for lag in lags]
        print(
            f"{name}: {len(ms)} ticks, {cut} cells cut off; event-loop lag ms: "
            f"median {statistics.median(ms):.1f}, p99 {percentile(ms, 0.99):.1f}, "
            f"max {max(ms):.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    asyncio.run(main(parser.parse_args().seconds))
