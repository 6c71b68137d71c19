"""A memory and a cpu cgroup per sandbox, where the host offers them.

Memory: a cap on all its processes' memory together, RAM-backed files (memfd, pipes) and
page cache included. Per-process rlimits cannot do that: RLIMIT_DATA is per process and
a memfd's pages count against none of them.
CPU: an equal share of the CPU for each sandbox (`cpu.shares`), so one sandbox's hundreds
of busy processes cannot starve the others, and optionally a cap on the cores it may keep
busy (`cpu.cfs_quota_us`). How much CPU time a call may spend in all is watched from
outside in every case (`cpu`), cgroups or not.

Used when the bot runs as root on cgroup v1 with these controllers (a child of the bot's
own cgroup is made per sandbox and controller). Elsewhere (no root; cgroup v2, where a
process may only move between cgroups whose common parent's `cgroup.procs` it may write,
which the unprivileged sandbox uid may not) there are none, and the bot says so once in
its log. Each container joins its sandbox's cgroups before anything of it runs: its first
programs are `sh -c 'echo $$ > cgroup.procs; exec ...'` (those files are chowned to the
sandbox's uid; nothing inside sees /sys at all).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "sandbox-"
JOIN_SH = 'echo $$ > "$0" && exec "$@"'
CPU_SHARES = 1024  # the kernel's default weight: each sandbox counts as one process would
REMOVE_WAIT_S = 2.0
CFS_PERIOD_US = 100_000  # the kernel's default period, if the parent does not say


def memory_parent() -> Path | None:
    """The bot's own v1 memory cgroup, if this process may make children in it."""
    return _v1_parent("memory")


def cpu_parent() -> Path | None:
    """The bot's own v1 cpu cgroup, if this process may make children in it."""
    return _v1_parent("cpu")


def make(parent: Path, name: str, limit: int, uid: int | None) -> Path | None:
    """The sandbox's cgroup with its memory limit (swap included where accounted)."""

    def set_limit(path: Path) -> None:
        (path / "memory.limit_in_bytes").write_text(str(limit))
        with contextlib.suppress(OSError):  # only with swap accounting
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit))

    return _make(parent, name, "memory", set_limit, uid)


def make_cpu(parent: Path, name: str, cpus: float | None, uid: int | None) -> Path | None:
    """The sandbox's cpu cgroup: an equal share, at most `cpus` cores (None: no cap)."""

    def set_share(path: Path) -> None:
        period = _read_int(parent / "cpu.cfs_period_us", CFS_PERIOD_US)
        (path / "cpu.cfs_period_us").write_text(str(period))
        (path / "cpu.shares").write_text(str(CPU_SHARES))
        quota = max(int(cpus * period), 1000) if cpus else -1  # the kernel's least: 1 ms
        (path / "cpu.cfs_quota_us").write_text(str(quota))

    return _make(parent, name, "cpu", set_share, uid)


def _make(
    parent: Path, name: str, controller: str, configure: Callable[[Path], None], uid: int | None
) -> Path | None:
    """The sandbox's cgroup under `parent`, set up by `configure`, its `cgroup.procs` the
    sandbox uid's (it moves itself in); None, and nothing left, where that fails."""
    path = parent / f"{PREFIX}{name}"
    try:
        path.mkdir(exist_ok=True)
        configure(path)
        if uid is not None:
            os.chown(path / "cgroup.procs", uid, uid)
    except OSError as exc:
        log.warning("no %s cgroup for sandbox %s: %s", controller, name, exc)
        remove(path)
        return None
    return path


def join_command(cgroups: Sequence[Path]) -> list[str]:
    """The command prefix that moves a container into each of `cgroups` first: one shell
    per cgroup, each exec'ing the next, so all is done by the container's first pid."""
    command: list[str] = []
    for cgroup in cgroups:
        command += ["/bin/sh", "-c", JOIN_SH, str(cgroup / "cgroup.procs")]
    return command


def remove(path: Path, wait_s: float = REMOVE_WAIT_S) -> None:
    """rmdir the cgroup. Only an empty one can go: processes just killed may still be on
    their way out, so a busy one is tried again for up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
        time.sleep(0.05)


def _v1_parent(controller: str) -> Path | None:
    if os.geteuid() != 0:
        return None
    mount = _v1_mount(controller)
    own = _own_cgroup(controller)
    if mount is None or own is None:
        return None
    parent = mount / own.lstrip("/")
    return parent if os.access(parent, os.W_OK) else None


def _read_int(path: Path, default: int) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return default


def _v1_mount(controller: str) -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields = right.split()
            if fields[:1] == ["cgroup"] and controller in fields[-1].split(","):
                return Path(left.split()[4])
    return None


def _own_cgroup(controller: str) -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return path
    return None
