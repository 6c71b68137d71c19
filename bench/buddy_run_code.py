"""Benchmark: what one run_code costs on the Buddy backend, against the fake Buddy API.

Run from the repository root: `.venv/bin/python -m bench.buddy_run_code [--calls N]`.
Prints the HTTP requests per run_code, and the client's own cost per call: CPU time in the
bot's process (the fake runs in another process) and wall time next to a local run of the
same code. The fake polls its commands every 50 ms, so wall times include that; the CPU
figure is the client's overhead proper.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import sandbox_root
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from bot.sandbox.local import LocalProvider
from tests.fakes.buddy import FakeBuddy

REPO = str(Path(__file__).resolve().parents[1])

SERVE = """
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.fakes.buddy import FakeBuddy

async def main():
    async with FakeBuddy(Path({root!r}), boot_delay_s=0.05) as fake:
        fake.status_lag_s = 0
        print(fake.base_url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def config(base_url: str, kernel: bool = True, **options: Any) -> BuddyConfig:
    return BuddyConfig(
        token="buddy-test-token", workspace="acme", project="analytics", api_url=base_url,
        python_kernel=kernel, **options,
    )  # fmt: skip


async def requests_per_call(
    root: Path,
    language: str,
    limit_s: float,
    status_lag_s: float = 0.0,
    code: str | None = None,
    **options: Any,
) -> collections.Counter[str]:
    """The requests of one run_code (after one that started the kernel, for Python)."""
    async with FakeBuddy(root, boot_delay_s=0.05) as fake:
        fake.status_lag_s = status_lag_s
        provider = BuddyProvider(config(fake.base_url, **options))
        sandbox = await provider.create(SandboxSpec("bench-count"))
        if language == "python":
            await sandbox.run_code(language, "print(1)", limit_s)  # starts the kernel
        code = code or ("print(1)" if language == "python" else "echo 1")
        before = len(fake.requests)
        await sandbox.run_code(language, code, limit_s)
        counts = collections.Counter(_label(r.method, r.path) for r in fake.requests[before:])
        await sandbox.destroy()
        await provider.close()
    return counts


def _requests_line(what: str, counts: collections.Counter[str]) -> str:
    detail = ", ".join(f"{n} × {label}" for label, n in sorted(counts.items()))
    return f"HTTP requests per {what}: {sum(counts.values())} ({detail})"


def _label(method: str, path: str) -> str:
    """`POST …/commands`, `GET …/commands/{id}`, `GET …/commands/{id}/logs`."""
    tail = path.split("/sandboxes/", 1)[-1].split("/")[1:]
    shape = "/".join("{id}" if i == 1 else part for i, part in enumerate(tail))
    return f"{method} …/{shape}"


async def timed_calls(
    sandbox, calls: int, language: str = "bash", code: str = "echo 1"
) -> tuple[float, float]:
    """Median wall time and median CPU time of this process per run_code."""
    walls, cpus = [], []
    for _ in range(calls):
        wall, cpu = time.perf_counter(), time.process_time()
        result = await sandbox.run_code(language, code, 30)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
        assert result.status == "ok", result
    return statistics.median(walls), statistics.median(cpus)


async def buddy_timings(
    root: Path, calls: int, language: str = "bash", code: str = "echo 1", kernel: bool = True
) -> tuple[float, float]:
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVE.format(repo=REPO, root=str(root)),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert server.stdout is not None and server.stdin is not None
    base_url = (await server.stdout.readline()).decode().strip()
    provider = BuddyProvider(config(base_url, kernel))
    try:
        sandbox = await provider.create(SandboxSpec("bench-time"))
        await sandbox.run_code(language, code, 30)  # a warm-up (a kernel cell starts it)
        timings = await timed_calls(sandbox, calls, language, code)
        await sandbox.destroy()
    finally:
        await provider.close()
        server.stdin.close()
        await server.wait()
    return timings


async def local_timings(root: Path, calls: int) -> tuple[float, float]:
    provider = LocalProvider(root)
    sandbox = await provider.create(SandboxSpec("bench-local"))
    try:
        return await timed_calls(sandbox, calls)
    finally:
        await sandbox.destroy()
        await provider.close()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    calls = parser.parse_args().calls
    with sandbox_root() as root:
        for lag in (0.0, 0.1):
            counts = await requests_per_call(root, "bash", 30, lag)
            print(_requests_line(f"run_code, status lag {lag:.1f} s", counts))
        for limit_s in (30.0, 60.0, 600.0):
            counts = await requests_per_call(root, "python", limit_s)
            print(_requests_line(f"warm kernel cell, limit {limit_s:.0f} s", counts))
        long_cell = "import time; time.sleep(3.5)"  # as a 120 s cell is, with hand-offs at 35 s
        counts = await requests_per_call(root, "python", 60, code=long_cell, cell_hand_off_s=1)
        print(_requests_line("3.5 s cell, its frames handed off every 1 s", counts))
        buddy_wall, buddy_cpu = await buddy_timings(root, calls)
        local_wall, local_cpu = await local_timings(root, calls)
        cell, _ = await buddy_timings(root, calls, "python", "print(1)", kernel=True)
        process, _ = await buddy_timings(root, calls, "python", "print(1)", kernel=False)
    print(f"Python on Buddy (fake), warm kernel cell: median {cell * 1000:.1f} ms wall")
    print(f"Python on Buddy (fake), process per call: median {process * 1000:.1f} ms wall")
    print(f"kernel / process: {cell / process:.2f}")
    print(f"run_code on Buddy (fake in another process): median {buddy_wall * 1000:.1f} ms wall")
    print(f"run_code on the local sandbox, same code:     median {local_wall * 1000:.1f} ms wall")
    print(
        f"client CPU per run_code in the bot's process: Buddy {buddy_cpu * 1000:.2f} ms, "
        f"local {local_cpu * 1000:.2f} ms"
    )


if __name__ == "__main__":
    asyncio.run(main())
