"""How many local sandboxes one bot process keeps alive at once (MAX_SANDBOXES).

Every live sandbox may run a kernel and detached commands, so the host's CPU, memory and
disk are shared by at most this many. A sandbox over the cap waits for a slot (one is
freed when a sandbox is destroyed or stopped); if none comes free in time it is refused
with a message that says why.
"""

from __future__ import annotations

import asyncio
import logging

from bot.errors import SandboxUnavailable

log = logging.getLogger(__name__)


class Slots:
    def __init__(self, limit: int | None, wait_s: float) -> None:
        self.limit, self.wait_s = limit, wait_s
        self._free = asyncio.Semaphore(limit) if limit else None
        self.waiting: list[str] = []  # the sessions whose sandbox waits for a slot now

    async def take(self, session_key: str = "") -> None:
        if self._free is None:
            return
        if not self._free.locked():  # a free slot: taken at once (even with wait_s 0)
            await self._free.acquire()
            return
        log.info("all %d sandbox slots are taken: a new sandbox waits for one", self.limit)
        self.waiting.append(session_key)
        try:
            await asyncio.wait_for(self._free.acquire(), self.wait_s)
        except TimeoutError:
            raise SandboxUnavailable(
                f"all {self.limit} sandboxes this bot may run at once are in use, and none "
                f"came free within {self.wait_s:.0f} s; try again in a few minutes"
            ) from None
        finally:
            self.waiting.remove(session_key)

    def holds_back(self, session_key: str) -> int:
        """The cap, while `session_key`'s sandbox waits for a slot; else 0."""
        return (self.limit or 0) if session_key in self.waiting else 0

    def give_back(self) -> None:
        if self._free is not None:
            self._free.release()
