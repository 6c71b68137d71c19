"""A session's disk quota on the host. The local sandbox writes into plain host folders, so
nothing but this stops a loop from filling the disk under the bot and every other session.

Two parts: RLIMIT_FSIZE (in the container's limits) caps any one file at the quota, so a
single runaway file fails at once (EFBIG); and while anything runs in the sandbox a
watcher measures its folders (every second while far below the quota, every 20 ms close to
it) and, as soon as they pass the quota, kills what runs there (a writer at page-cache speed
gets a few tens of MB past it first).
A session already over its quota (a file uploaded before the limit was lowered, say) may
still run code that deletes files: a call is killed only when its folders grow past
`max(quota, what they held when the watching began)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from bot.sandbox.local import hostfs
from bot.units import size_text

POLL_S, MAX_POLL_S = 0.02, 1.0  # between two measurements
FASTEST_WRITE = 2 << 30  # bytes a second a writer may manage (page cache): far from the
# quota the watcher looks seldom, close to it every POLL_S


def used_bytes(folders: list[Path]) -> int:
    """Disk blocks used under `folders` (sparse files count what they hold, not their size)."""
    return hostfs.usage(folders).bytes


def over_quota_note(limit: int) -> str:
    return (
        f"Stopped: the session's files passed their disk quota of {size_text(limit)}. Delete "
        "files you no longer need, or write less (sample, aggregate, compress)."
    )


class Watch:
    """One call under the quota: `fired` once the quota stopped it."""

    fired = False


class DiskQuota:
    def __init__(
        self, folders: list[Path], limit: int, stop_all: Callable[[], Awaitable[None]]
    ) -> None:
        self.folders, self.limit = folders, limit
        self._stop_all = stop_all  # kills everything running in the sandbox
        self._watches: set[Watch] = set()
        self._watcher: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[Watch]:
        """Watch the folders while the body runs (shared by calls that overlap)."""
        watch = Watch()
        self._watches.add(watch)
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._watch())
        try:
            yield watch
        finally:
            self._watches.discard(watch)
            if not self._watches and self._watcher is not None:
                self._watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._watcher

    async def room(self) -> int:
        """Bytes that may still be written (an upload checks before it starts)."""
        return self.limit - await asyncio.to_thread(used_bytes, self.folders)

    async def _watch(self) -> None:
        ceiling = max(self.limit, await asyncio.to_thread(used_bytes, self.folders))
        while True:
            started = time.monotonic()
            used = await asyncio.to_thread(used_bytes, self.folders)
            if used > ceiling:
                for watch in self._watches:
                    watch.fired = True
                await self._stop_all()
                ceiling = max(self.limit, used)  # what is left is for the model to clean up
            walk_s = time.monotonic() - started
            await asyncio.sleep(_pause(ceiling - used, walk_s))


def _pause(room: int, walk_s: float) -> float:
    """Till the next look: the time the fastest writer needs to fill `room`, within bounds
    (and never less than twice a walk, for folders with many files)."""
    return max(min(MAX_POLL_S, room / FASTEST_WRITE), POLL_S, 2 * walk_s)
