"""A session's disk quota on the host. The local sandbox writes into plain host folders, so
nothing but this stops a loop from filling the disk under the bot and every other session.

Two parts: RLIMIT_FSIZE (in the container's limits) caps any one file at the quota, so a
single runaway file fails at once (EFBIG); and for as long as any container of the sandbox
lives (the kernel between cells, a thread a cell left writing, a detached command, a file
helper), a watcher measures its folders: bytes and inodes (every second while far below
the quota, every 20 ms close to it). As soon as they pass the quota it kills everything in
the sandbox (a writer at page-cache speed gets a few tens of MB past it first).
The folders are work/, data/, and the container's /tmp and /dev/shm (on disk under the
sandbox's folder, not in RAM).
A session already over its quota (a file uploaded before the limit was lowered, or what a
writer left as it was stopped) may still run code that deletes files: the sandbox is
stopped only when its folders grow past `max(quota, what they held when the call began +
HEADROOM)`. The headroom is for what any call adds before its code can delete anything:
the folders the bot makes for each new container (its /tmp and /dev/shm), a shell's small
files. Without it a session at its quota could run nothing, not even the clean-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from bot.sandbox.local import hostfs
from bot.sandbox.local.hostfs import Usage
from bot.units import size_text

POLL_S, MAX_POLL_S = 0.02, 1.0  # between two measurements
FASTEST_WRITE = 2 << 30  # bytes a second a writer may manage (page cache): far from the
# quota the watcher looks seldom, close to it every POLL_S
FASTEST_CREATE = 200_000  # files a second a loop may create
HEADROOM = Usage(1 << 20, 64)  # bytes and inodes a call may add to folders past the quota


def used_bytes(folders: list[Path]) -> int:
    """Disk blocks used under `folders` (sparse files count what they hold, not their size)."""
    return hostfs.usage(folders).bytes


def over_quota_note(limit: int, max_files: int | None = None) -> str:
    files = f" or {max_files:,} files and folders" if max_files else ""
    return (
        f"Stopped: the session's files passed their disk quota of {size_text(limit)}{files}. "
        "Every process in the sandbox was killed (the Python kernel too). Delete files you "
        "no longer need, or write less (sample, aggregate, compress)."
    )


class Watch:
    """One call (`call`), or one container, under the quota: `fired` once the quota
    stopped it."""

    def __init__(self, call: bool = False) -> None:
        self.call = call
        self.fired = False


class DiskQuota:
    def __init__(
        self,
        folders: list[Path],
        limit: int,
        stop_all: Callable[[], Awaitable[None]],
        max_files: int | None = None,
    ) -> None:
        self.folders, self.limit, self.max_files = folders, limit, max_files
        self._stop_all = stop_all  # kills everything running in the sandbox
        self._watches: set[Watch] = set()
        self._watcher: asyncio.Task[None] | None = None
        self.unseen = False  # fired while no call watched: the next call's result says so
        self._rebase = False
        self._stopping: asyncio.Future[None] | None = None  # the stop the quota started

    def hold(self, *, call: bool = False) -> Watch:
        """Watch from now until `release`: the watcher runs while any watch is held."""
        watch = Watch(call)
        self._watches.add(watch)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch())
        elif call:
            self._rebase = True  # a new call is judged by what it adds, not what it found
        return watch

    def release(self, watch: Watch) -> None:
        self._watches.discard(watch)
        if not self._watches and self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[Watch]:
        """A call under the quota: its watch says whether the quota stopped it."""
        watch = self.hold(call=True)
        try:
            yield watch
        finally:
            if watch.fired and self._stopping is not None:
                # The call ends once its writers are dead: else they write on into the
                # next call, which would be judged by what they add.
                await asyncio.shield(self._stopping)
            self.release(watch)

    def note(self) -> str:
        return over_quota_note(self.limit, self.max_files)

    async def room(self) -> int:
        """Bytes that may still be written (an upload checks before it starts); none once
        the inodes are used up."""
        used = await asyncio.to_thread(hostfs.usage, self.folders)
        if self.max_files is not None and used.inodes >= self.max_files:
            return 0
        return self.limit - used.bytes

    async def _watch(self) -> None:
        ceiling = self._ceiling(await asyncio.to_thread(hostfs.usage, self.folders))
        while True:
            started = time.monotonic()
            used = await asyncio.to_thread(hostfs.usage, self.folders)
            if self._rebase:
                self._rebase, ceiling = False, self._ceiling(used)
            if used.bytes > ceiling.bytes or used.inodes > ceiling.inodes:
                self._fire()
                # Shielded: the containers' end releases their watches, which may cancel
                # this task before the stopping is done (the call waits for it).
                self._stopping = asyncio.ensure_future(self._stop_all())
                await asyncio.shield(self._stopping)
                # What is left, measured once the writers are dead (they wrote on while
                # being stopped), is for the model to clean up.
                used = await asyncio.to_thread(hostfs.usage, self.folders)
                ceiling = self._ceiling(used)
            await asyncio.sleep(self._pause(ceiling, used, time.monotonic() - started))

    def _fire(self) -> None:
        for watch in self._watches:
            watch.fired = True
        self.unseen = self.unseen or not any(watch.call for watch in self._watches)

    def _ceiling(self, used: Usage) -> Usage:
        """What the folders may hold: the quota, or what they hold now (and a little) if
        more."""
        room = used + HEADROOM
        inodes = max(self.max_files, room.inodes) if self.max_files else 1 << 62
        return Usage(max(self.limit, room.bytes), inodes)

    @staticmethod
    def _pause(ceiling: Usage, used: Usage, walk_s: float) -> float:
        """Till the next look: the time the fastest writer needs to reach the ceiling,
        within bounds (and never less than twice a walk, for folders with many files)."""
        room_s = min(
            (ceiling.bytes - used.bytes) / FASTEST_WRITE,
            (ceiling.inodes - used.inodes) / FASTEST_CREATE,
        )
        return max(min(MAX_POLL_S, room_s), POLL_S, 2 * walk_s)
