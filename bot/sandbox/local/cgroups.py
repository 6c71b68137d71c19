"""A memory cgroup per sandbox, where the host offers one: a cap on all its processes'
memory together, RAM-backed files (memfd, pipes) and page cache included. Per-process
rlimits cannot do that: RLIMIT_DATA is per process and a memfd's pages count against
none of them.

Used when the bot runs as root on cgroup v1 with a memory controller (a child of the
bot's own memory cgroup is made per sandbox). Elsewhere (no root, cgroup v2 whose memory
controller cannot be delegated to a process's own cgroup) there is none, and the bot says
so once in its log. Each container joins its sandbox's cgroup before anything of it runs:
its first program is `sh -c 'echo $$ > cgroup.procs; exec ...'` (that file is chowned to
the sandbox's uid; nothing inside sees /sys at all).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "sandbox-"
JOIN_SH = 'echo $$ > "$0" && exec "$@"'


def memory_parent() -> Path | None:
    """The bot's own v1 memory cgroup, if this process may make children in it."""
    if os.geteuid() != 0:
        return None
    mount = _v1_mount("memory")
    own = _own_cgroup("memory")
    if mount is None or own is None:
        return None
    parent = mount / own.lstrip("/")
    return parent if os.access(parent, os.W_OK) else None


def make(parent: Path, name: str, limit: int, uid: int | None) -> Path | None:
    """The sandbox's cgroup with its memory limit (swap included where accounted)."""
    path = parent / f"{PREFIX}{name}"
    try:
        path.mkdir(exist_ok=True)
        (path / "memory.limit_in_bytes").write_text(str(limit))
        with contextlib.suppress(OSError):  # only with swap accounting
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
        if uid is not None:
            os.chown(path / "cgroup.procs", uid, uid)
    except OSError as exc:
        log.warning("no memory cgroup for sandbox %s: %s", name, exc)
        remove(path)
        return None
    return path


def join_command(cgroup: Path | None) -> list[str]:
    """The command prefix that moves a container into `cgroup` first (none: empty)."""
    if cgroup is None:
        return []
    return ["/bin/sh", "-c", JOIN_SH, str(cgroup / "cgroup.procs")]


def remove(path: Path) -> None:
    """rmdir the cgroup (only an empty one can go: its processes must have ended)."""
    with contextlib.suppress(OSError):
        path.rmdir()


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
