"""A host uid of its own for each sandbox, when the bot runs as root.

The kernel counts RLIMIT_NPROC per real uid: sandboxes sharing one uid share one process
cap, and one of them that fills it makes every other's bwrap fail ("Creating new namespace
failed: Resource temporarily unavailable"). So each sandbox gets a uid from a range no
host user has; its `work/` folder is owned by it, which is also where the uid is read back
after a restart. A lock on the sandbox root (flock on the folder itself) makes the choice
safe between bot processes sharing the root.

Without root there is no uid to switch to: every sandbox runs as the bot's own uid and
they share its process cap (and the bot's own processes count against it too).

The lock is per root: bots sharing a host with roots of their own each need a range of
their own, starting at SANDBOX_UID_BASE (a setting, handed to the provider).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

from bot.settings.sandbox import DEFAULT_UID_BASE

UID_COUNT = 50_000
LEGACY_UID = 65534  # what every sandbox ran as before each had its own


def uid_range(base: int = DEFAULT_UID_BASE) -> range:
    return range(base, base + UID_COUNT)


class UidsExhausted(RuntimeError):
    pass


def claim_uid(root: Path, make: Callable[[int], None], uids: range) -> int:
    """Pick a uid no sandbox under `root` has and call `make(uid)` (which chowns the new
    sandbox's work folder to it) before another process can pick the same one."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        taken = in_use(root)
        uid = next((u for u in uids if u not in taken), None)
        if uid is None:
            raise UidsExhausted(f"all {len(uids)} sandbox uids are in use under {root}")
        make(uid)
        return uid
    finally:
        os.close(fd)  # releases the lock


def in_use(root: Path) -> set[int]:
    taken = set()
    for entry in os.scandir(root):
        try:
            taken.add(os.stat(os.path.join(entry.path, "work"), follow_symlinks=False).st_uid)
        except OSError:
            continue
    return taken


def owner(home: Path, uids: range) -> int | None:
    """The uid a sandbox runs as: its work folder's owner (the sandbox cannot chown it).
    None if that is no sandbox uid (root, say): such a folder is not run as its owner."""
    uid = os.stat(home / "work", follow_symlinks=False).st_uid
    return uid if uid in uids or uid == LEGACY_UID else None
