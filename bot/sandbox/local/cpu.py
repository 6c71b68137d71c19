"""CPU time of a container, read from the host's /proc: a limit no process inside can lift.

A process can raise its own soft RLIMIT_CPU up to the hard one, and each child it forks
starts counting afresh, so per-process rlimits cannot bound what a kernel cell spends.
The bot sums instead what the container's whole process tree has used (running processes,
plus what reaped children left in their parents' cumulative times) and kills the
container when a cell's share passes its budget.
"""

from __future__ import annotations

import os
from collections import defaultdict

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """CPU seconds used by `root` and all its descendants, dead ones that were reaped
    within the tree included; 0.0 once `root` is gone."""
    children: defaultdict[int, list[int]] = defaultdict(list)
    ticks: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (stat := _stat(name)) is not None:
            ppid, used = stat
            children[ppid].append(int(name))
            ticks[int(name)] = used
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += ticks.get(pid, 0)
        stack += children.get(pid, [])
    return total / TICKS


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, utime + stime + cutime + cstime in ticks) of one process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name may hold spaces and ")"
    try:
        return int(fields[1]), sum(int(f) for f in fields[11:15])
    except (IndexError, ValueError):
        return None
