"""Benchmark: what watching every container's CPU time costs the bot.

One `CpuWatch` pass reads /proc/<pid>/stat for every process on the host and sums each
watched tree. This starts `--processes` idle processes (as many sandboxes' worth of
busy-looping children would be), in `--trees` trees, and times one pass over all trees:
the bot makes one such pass per half second, however many calls and commands run.

Run from the repository root: `.venv/bin/python -m bench.cpu_watch [--processes 1000]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from bot.sandbox.local.cpu import CPU_POLL_S, tree_cpu_times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=1000)
    parser.add_argument("--trees", type=int, default=50)
    parser.add_argument("--passes", type=int, default=20)
    args = parser.parse_args()
    per_tree = max(args.processes // args.trees, 1)
    script = f"for i in $(seq {per_tree}); do sleep 600 & done; wait"
    roots = [subprocess.Popen(["sh", "-c", script]) for _ in range(args.trees)]
    try:
        time.sleep(2)  # let the children start
        on_host = sum(name.isdigit() for name in os.listdir("/proc"))
        pids = [root.pid for root in roots]
        took, cpu = [], []  # wall time (a busy host stretches it), and CPU time spent
        for _ in range(args.passes):
            started, cpu_started = time.perf_counter(), time.process_time()
            tree_cpu_times(pids)
            took.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
        wall, used = statistics.median(took), statistics.median(cpu)
        print(f"{on_host} processes on the host, {len(pids)} watched trees")
        print(f"one pass: median {wall * 1000:.1f} ms wall, {used * 1000:.1f} ms CPU")
        print(f"share of one core at one pass per {CPU_POLL_S} s: {used / CPU_POLL_S:.1%}")
    finally:
        for root in roots:
            subprocess.run(["pkill", "-KILL", "-P", str(root.pid)], check=False)
            root.kill()
            root.wait()


if __name__ == "__main__":
    main()
