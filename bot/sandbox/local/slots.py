"""How many local sandboxes one bot process keeps alive at once (MAX_SANDBOXES).

Every live sandbox may run a kernel and detached commands, so the host's CPU, memory and
disk are shared by at most this many. A sandbox over the cap first has room made for it:
the engine stops or deletes the sandbox of a thread with no run going (`make_room`; one
is freed when a sandbox is destroyed or stopped). Only while every sandbox has a run going
does it wait for a slot, looking again for room every RETRY_S; if no slot at all comes free
for SANDBOX_WAIT_S it is refused with a message that says why. A queue that moves is no
reason to refuse: in a burst every slot may be taken by earlier waiters for minutes, yet
each waiter's turn comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from bot.errors import SandboxUnavailable
from bot.sandbox.base import MakeRoom

log = logging.getLogger(__name__)

RETRY_S = 1.0  # while waiting: how often room is sought again (a run may have ended)


async def _no_room(session_key: str) -> bool:
    return False


class Slots:
    def __init__(self, limit: int | None, wait_s: float) -> None:
        self.limit, self.wait_s = limit, wait_s
        self._free = asyncio.Semaphore(limit) if limit else None
        self.waiting: list[str] = []  # the sessions whose sandbox waits for a slot now
        self.taken = 0  # slots held by sandboxes now
        self.make_room: MakeRoom = _no_room  # the engine's, once it runs
        self._last_freed = 0.0  # time.monotonic() when a slot last came free

    async def take(self, session_key: str = "") -> None:
        if self._free is None:
            return
        try:
            await self._acquire(session_key, time.monotonic())
        finally:
            if session_key in self.waiting:
                self.waiting.remove(session_key)
        self.taken += 1

    async def _acquire(self, session_key: str, since: float) -> None:
        assert self._free is not None
        while True:
            if not self._free.locked():  # a free slot: taken at once (even with wait_s 0)
                await self._free.acquire()
                return
            # Each sandbox let go frees one slot: this one's, or one an earlier waiter
            # takes (then room is made again).
            if await self.make_room(session_key):
                continue
            if session_key not in self.waiting:
                log.info("all %d sandboxes have runs going: a new one waits for one", self.limit)
                self.waiting.append(session_key)
            left = max(since, self._last_freed) + self.wait_s - time.monotonic()
            if left <= 0:
                raise SandboxUnavailable(
                    f"all {self.limit} sandboxes this bot may run at once are in use, and "
                    f"none came free within {self.wait_s:.0f} s; try again in a few minutes"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._free.acquire(), min(left, RETRY_S))
                return

    def has_room(self) -> bool:
        """A slot is free now, and no sandbox waits for one."""
        return self.limit is None or (self.taken < self.limit and not self.waiting)

    def holds_back(self, session_key: str) -> int:
        """The cap, while `session_key`'s sandbox waits for a slot; else 0."""
        return (self.limit or 0) if session_key in self.waiting else 0

    def give_back(self) -> None:
        if self._free is not None:
            self.taken -= 1
            self._last_freed = time.monotonic()
            self._free.release()
