"""Host-side walks of a sandbox's folders that never follow a link the sandbox planted.

Sandbox code can replace any entry under its folders with a symlink at any moment, so a
path the bot resolves there may lead anywhere on the host (and the bot may be root).
Every walk here goes down from a directory fd the bot opened itself, opening each
sub-folder relative to its parent with O_NOFOLLOW | O_DIRECTORY: a link met on the way is
never entered, whenever it was planted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Usage:
    """What a sandbox's folders hold: disk blocks in bytes, and inodes (files, folders,
    links: each one entry of the file system's inode table)."""

    bytes: int = 0
    inodes: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.bytes + other.bytes, self.inodes + other.inodes)


def open_dir(path: Path) -> int:
    """An fd for a folder the bot made; refuses a link in its last component."""
    return os.open(path, DIR_FLAGS)


def open_subdir(parent: int, name: str) -> int:
    return os.open(name, DIR_FLAGS, dir_fd=parent)


def usage(folders: list[Path]) -> Usage:
    """Disk blocks and inodes used under `folders` (sparse files count what they hold)."""
    total = Usage()
    for folder in folders:
        with contextlib.suppress(OSError):
            total += _usage_of(open_dir(folder))
    return total


def _usage_of(top: int) -> Usage:
    used, inodes = 0, 0
    for parent, _, st in _walk(top):
        inodes += parent is not None  # the top folder is the bot's, not the sandbox's
        used += st.st_blocks * 512
    return Usage(used, inodes)


def _walk(top: int) -> Iterator[tuple[int | None, str, os.stat_result]]:
    """(parent fd or None for `top`, name, lstat) of `top` and everything under it. Takes
    ownership of `top`; sub-folders are entered through fds only."""
    stack = [top]
    try:
        yield None, "", os.fstat(top)
        while stack:
            fd = stack.pop()
            try:
                for name in _names(fd):
                    try:
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except OSError:
                        continue  # removed while we looked
                    yield fd, name, st
                    if stat.S_ISDIR(st.st_mode):
                        with contextlib.suppress(OSError):  # swapped for a link: not entered
                            stack.append(open_subdir(fd, name))
            finally:
                os.close(fd)
    finally:
        for fd in stack:
            os.close(fd)


def _names(fd: int) -> list[str]:
    with contextlib.suppress(OSError), os.scandir(fd) as entries:
        return [entry.name for entry in entries]
    return []


def remove_tree(path: Path) -> None:
    """Remove `path` and all under it, without following links; no-op if it is gone.
    Folders the sandbox made read-only are made writable first (needed when not root)."""
    try:
        top = open_dir(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        os.unlink(path)  # a link or a file where the folder was: the entry itself goes
        return
    try:
        with contextlib.suppress(OSError):
            os.fchmod(top, 0o700)
        _empty(top)
    finally:
        os.close(top)
    os.rmdir(path)


def _empty(top: int) -> None:
    """Delete everything in the folder `top`, depth first through fds (no recursion)."""
    # Each frame: a folder's fd, its name in the frame below, and the names left in it.
    stack: list[tuple[int, str, list[str]]] = [(top, "", _names(top))]
    try:
        while stack:
            fd, name, left = stack[-1]
            if left:
                entry = left.pop()
                if (child := _take_entry(fd, entry)) is not None:
                    stack.append((child, entry, _names(child)))
                continue
            stack.pop()
            if stack:  # emptied: close it and remove it from its parent
                os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(name, dir_fd=stack[-1][0])
    finally:
        for fd, _, _ in stack[1:]:
            os.close(fd)


def _take_entry(parent: int, name: str) -> int | None:
    """Unlink a non-folder; for a folder, return an fd to empty it first."""
    try:
        os.unlink(name, dir_fd=parent)
        return None
    except FileNotFoundError:
        return None
    except (IsADirectoryError, PermissionError) as exc:
        try:
            child = open_subdir(parent, name)
        except FileNotFoundError:
            return None  # removed meanwhile (a container's scratch folder, say)
        except OSError:
            raise exc from None
    with contextlib.suppress(OSError):
        os.fchmod(child, 0o700)  # a read-only folder blocks deleting its entries
    return child
