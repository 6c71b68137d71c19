"""CPU time of a container, read from the host's /proc: a limit no process inside can lift.

A process can raise its own soft RLIMIT_CPU up to the hard one, and each child it forks
starts counting afresh, so per-process rlimits cannot bound what a call spends: 256 busy
loops, each restarted when its own limit kills it, would hold every core. The bot sums
instead what a container's whole process tree has used (running processes, plus what
reaped children left in their parents' cumulative times) and kills the container when
the sum passes its budget. Orphans stay in the tree: the namespace's init adopts them.

One `CpuWatch` looks at /proc once per poll for every container it watches, so the cost
does not grow with the number of calls and commands running; a pass reads every process
on the host, so where there are so many that it takes long, it looks less often
(`bench/cpu_watch.py`: about 20 us of CPU per process).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

TICKS = os.sysconf("SC_CLK_TCK")
CPU_POLL_S = 0.5  # between two looks at the watched trees' CPU time
MAX_SHARE = 0.1  # of the time, at most, spent reading /proc (each pass reads every process)
STAT_READ = 4096  # /proc/<pid>/stat is one line of a few hundred bytes (names are short)


def tree_cpu_times(roots: Iterable[int]) -> dict[int, float]:
    """CPU seconds used by each of `roots` and all its descendants, dead ones that were
    reaped within the tree included; 0.0 for a root that is gone. One pass over /proc."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    ticks: dict[int, int] = {}
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in os.listdir(proc):
            if name.isdigit() and (stat := _stat(proc, name)) is not None:
                ppid, used = stat
                children[ppid].append(int(name))
                ticks[int(name)] = used
    finally:
        os.close(proc)
    totals = {}
    for root in roots:
        total, stack = 0, [root]
        while stack:
            pid = stack.pop()
            total += ticks.get(pid, 0)
            stack += children.get(pid, [])
        totals[root] = total / TICKS
    return totals


def tree_cpu_s(root: int) -> float:
    """CPU seconds used by `root` and all its descendants (see `tree_cpu_times`)."""
    return tree_cpu_times([root])[root]


@dataclass(eq=False)
class Budget:
    """One watched tree: `over` is called once it spends more than `limit_s` past `start_s`
    (None: not counting yet)."""

    pid: int
    limit_s: float
    over: Callable[[], None]
    start_s: float | None = 0.0


class CpuWatch:
    """Watches the CPU time of process trees from outside them."""

    def __init__(self, poll_s: float = CPU_POLL_S) -> None:
        self._poll_s = poll_s
        self._budgets: set[Budget] = set()
        self._task: asyncio.Task[None] | None = None

    def watch(
        self, pid: int, limit_s: float, over: Callable[[], None], *, counting: bool = True
    ) -> Budget:
        """Call `over` once the tree under `pid` has used more than `limit_s` CPU seconds
        (from now on if `counting`, else from the next `restart`)."""
        budget = Budget(pid, limit_s, over, 0.0 if counting else None)
        self._budgets.add(budget)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = asyncio.create_task(self._poll())
        return budget

    async def restart(self, budget: Budget) -> None:
        """Count the budget afresh from the tree's CPU time now (a kernel's next cell)."""
        budget.start_s = await asyncio.to_thread(tree_cpu_s, budget.pid)

    def unwatch(self, budget: Budget) -> None:
        self._budgets.discard(budget)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _poll(self) -> None:
        pause = self._poll_s
        while self._budgets:
            await asyncio.sleep(pause)
            counting = [b for b in self._budgets if b.start_s is not None]
            if not counting:
                continue
            started = time.monotonic()
            used = await asyncio.to_thread(tree_cpu_times, {b.pid for b in counting})
            # A host with many processes is looked at less often, not at a higher cost.
            pause = max(self._poll_s, (time.monotonic() - started) / MAX_SHARE)
            for budget in counting:
                start = budget.start_s  # None again, or restarted, while /proc was read
                spent = start is not None and used[budget.pid] - start > budget.limit_s
                if spent and budget in self._budgets:
                    self._budgets.discard(budget)
                    budget.over()


def _stat(proc: int, pid: str) -> tuple[int, int] | None:
    """(parent pid, utime + stime + cutime + cstime in ticks) of one process. One open and
    one read: a pass reads every process on the host, so a file object's extra calls
    (fstat, a second read for the end) would cost several times more."""
    try:
        fd = os.open(f"{pid}/stat", os.O_RDONLY, dir_fd=proc)
    except OSError:
        return None
    try:
        raw = os.read(fd, STAT_READ)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name may hold spaces and ")"
    try:
        return int(fields[1]), sum(int(f) for f in fields[11:15])
    except (IndexError, ValueError):
        return None
