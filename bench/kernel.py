"""Benchmark: the Python kernel against a process per call.

A scripted five-step analysis of a generated CSV (200 MB by default: load; filter; group;
pivot; chart) runs twice on the local backend: with the kernel, each step a cell that
builds on the last, and without it, each step reading the file again and redoing what it
needs. Then the round trip of a trivial cell with a warm kernel, on the local backend and
on the fake Buddy (in a process of its own), next to a process per call.

Run from the repository root: `.venv/bin/python -m bench.kernel [--mb 200] [--calls 200]`.
The sandbox's python3 needs pandas and matplotlib (`make run` installs them).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench import sandbox_root
from bench.servers import served
from bot.sandbox.base import Sandbox, SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from bot.sandbox.local import LocalProvider

CSV = "/buddy/work/uploads/sales.csv"
REGIONS = ["north", "south", "east", "west", "centre", "coast", "hills", "islands"]
PRODUCTS = [f"p{n:02d}" for n in range(20)]
CHANNELS = ["web", "shop", "wholesale"]
LOAD = f"import pandas as pd\ndf = pd.read_csv({CSV!r})\nprint(df.shape)"
FILTER = "big = df[(df.amount > 500) & (df.channel != 'wholesale')]\nprint(len(big))"
GROUP = (
    "by_region = big.groupby('region').agg(total=('amount', 'sum'), "
    "orders=('amount', 'size'), avg_price=('price', 'mean'))\nprint(by_region.round(2))"
)
PIVOT = (
    "pivot = big.pivot_table(index='month', columns='region', values='amount', "
    "aggfunc='sum')\nprint(pivot.shape)"
)
CHART = "import matplotlib.pyplot as plt\npivot.plot(figsize=(10, 5), title='Revenue by region')\n"
STEPS = ["load", "filter", "group", "pivot", "chart"]
WITH_KERNEL = [LOAD, FILTER, GROUP, PIVOT, CHART + "plt.show()"]
# Without the kernel each step starts from nothing: it reads the file again.
WITHOUT_KERNEL = [
    LOAD,
    f"{LOAD}\n{FILTER}",
    f"{LOAD}\n{FILTER}\n{GROUP}",
    f"{LOAD}\n{FILTER}\n{PIVOT}",
    f"{LOAD}\n{FILTER}\n{PIVOT}\n{CHART}plt.savefig('/buddy/work/out/chart.png')",
]


def write_csv(path: Path, megabytes: int) -> int:
    """Sales rows until the file reaches `megabytes` MB; returns the row count."""
    rng = random.Random(7)
    target, rows = megabytes * 1_000_000, 0
    with path.open("w") as handle:
        handle.write("month,region,product,channel,units,price,amount\n")
        while handle.tell() < target:
            lines = []
            for _ in range(10_000):
                units, price = rng.randint(1, 40), round(rng.uniform(2, 90), 2)
                month = f"20{rng.randint(20, 24)}-{rng.randint(1, 12):02d}"
                lines.append(
                    f"{month},{rng.choice(REGIONS)},{rng.choice(PRODUCTS)},"
                    f"{rng.choice(CHANNELS)},{units},{price},{round(units * price, 2)}\n"
                )
            handle.write("".join(lines))
            rows += len(lines)
    return rows


async def file_chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as handle:
        while chunk := await asyncio.to_thread(handle.read, 1 << 20):
            yield chunk


async def run_steps(sandbox: Sandbox, cells: list[str]) -> list[float]:
    """Wall time of each step, from the caller's side."""
    times = []
    for code in cells:
        started = time.perf_counter()
        result = await sandbox.run_code("python", code, 600)
        times.append(time.perf_counter() - started)
        assert result.status == "ok", result
    return times


async def analysis(root: Path, csv: Path) -> dict[str, list[float]]:
    timings = {}
    for label, kernel, cells in (
        ("kernel", True, WITH_KERNEL),
        ("no kernel", False, WITHOUT_KERNEL),
    ):
        provider = LocalProvider(root / label.replace(" ", "-"), python_kernel=kernel)
        sandbox = await provider.create(SandboxSpec(f"bench-{label}"))
        try:
            await sandbox.upload(CSV, file_chunks(csv))
            timings[label] = await run_steps(sandbox, cells)
        finally:
            await sandbox.destroy()
            await provider.close()
    return timings


async def round_trips(sandbox: Sandbox, calls: int) -> float:
    """Median wall time of a trivial cell, after a warm-up that starts the kernel."""
    await sandbox.run_code("python", "print(1 + 1)", 30)
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await sandbox.run_code("python", "print(1 + 1)", 30)
        times.append(time.perf_counter() - started)
        assert result.status == "ok" and result.stdout.text == "2\n", result
    return statistics.median(times)


async def local_round_trips(root: Path, calls: int, kernel: bool) -> float:
    provider = LocalProvider(root, python_kernel=kernel)
    sandbox = await provider.create(SandboxSpec("bench-trivial"))
    try:
        return await round_trips(sandbox, calls if kernel else max(calls // 5, 10))
    finally:
        await sandbox.destroy()
        await provider.close()


async def buddy_round_trips(root: Path, calls: int) -> tuple[float, float]:
    """(with the kernel, without it) against the fake Buddy in another process."""
    medians = []
    async with served("buddy", str(root)) as base_url:
        for kernel in (True, False):
            config = BuddyConfig(
                token="buddy-test-token",
                workspace="acme",
                project="analytics",
                api_url=base_url,
                python_kernel=kernel,
            )
            provider = BuddyProvider(config)
            try:
                sandbox = await provider.create(SandboxSpec("bench-buddy"))
                medians.append(await round_trips(sandbox, calls))
                await sandbox.destroy()
            finally:
                await provider.close()
    return medians[0], medians[1]


def has_pandas() -> bool:
    probe = ["/usr/bin/python3", "-c", "import pandas, matplotlib"]
    return subprocess.run(probe, capture_output=True).returncode == 0


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200, help="size of the generated CSV")
    parser.add_argument("--calls", type=int, default=200, help="trivial cells to time")
    args = parser.parse_args()
    if not has_pandas():
        raise SystemExit("the sandbox's python3 needs pandas and matplotlib (make run)")
    with sandbox_root() as root:
        csv = root / "sales.csv"
        rows = await asyncio.to_thread(write_csv, csv, args.mb)
        print(f"generated {csv.stat().st_size / 1e6:.0f} MB, {rows:,} rows")
        timings = await analysis(root, csv)
        local_kernel = await local_round_trips(root / "trivial-kernel", args.calls, True)
        local_process = await local_round_trips(root / "trivial-process", args.calls, False)
        buddy_kernel, buddy_process = await buddy_round_trips(root / "buddy", args.calls // 5)
    print("\n| step | with kernel (s) | without (s) |\n|---|---|---|")
    for step, with_k, without in zip(STEPS, timings["kernel"], timings["no kernel"], strict=True):
        print(f"| {step} | {with_k:.2f} | {without:.2f} |")
    total_k, total_p = sum(timings["kernel"]), sum(timings["no kernel"])
    print(f"| total | {total_k:.2f} | {total_p:.2f} |")
    print(f"\nsandbox time with kernel / without: {total_k / total_p:.2f} (goal <= 0.35)")
    print(f"trivial cell, local, warm kernel: median {local_kernel * 1000:.2f} ms (goal <= 5)")
    print(f"trivial python, local, process per call: median {local_process * 1000:.1f} ms")
    print(f"trivial cell, Buddy (fake), warm kernel: median {buddy_kernel * 1000:.1f} ms")
    print(f"trivial python, Buddy (fake), process per call: median {buddy_process * 1000:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
