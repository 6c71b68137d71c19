"""Fake servers in processes of their own, so that the bot's process, and only it, is what
a benchmark measures. `python -m bench.servers anthropic MODULE:SCRIPT` or
`python -m bench.servers buddy ROOT` prints the server's base URL, then serves until its
standard input closes."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.buddy import FakeBuddy


@contextlib.asynccontextmanager
async def served(kind: str, argument: str) -> AsyncIterator[str]:
    """Start a fake in a subprocess; yields its base URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.servers", kind, argument,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdout is not None and process.stdin is not None
    try:
        yield (await process.stdout.readline()).decode().strip()
    finally:
        process.stdin.close()
        await process.wait()


async def _serve(kind: str, argument: str) -> None:
    if kind == "anthropic":
        module, _, name = argument.partition(":")
        fake = FakeAnthropic(getattr(importlib.import_module(module), name))
    else:
        fake = FakeBuddy(Path(argument), boot_delay_s=0.05)
    async with fake:
        if isinstance(fake, FakeBuddy):
            fake.status_lag_s = 0
        print(fake.base_url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], sys.argv[2]))
