"""Each thread's events handled by the replica that owns it (bot/coord). A replica that
receives an event for a thread another replica owns passes it to that replica's inbox;
with one process every thread is its own. An owner that stopped listening (it died; its
lease lapses within seconds) is waited out, then the thread is taken over."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.coord.base import LEASE_S, Coordinator

log = logging.getLogger(__name__)

TAKEOVER_WAIT_S = LEASE_S + 5  # a silent owner's lease lapses within this
RETRY_S = 0.5

Forget = Callable[[str], Awaitable[None]]  # drop this process's stale copy of a thread


class Router:
    def __init__(self, coord: Coordinator, forget: Forget) -> None:
        self.coord = coord
        self._forget = forget

    async def here(self, key: str, message: dict[str, Any]) -> bool:
        """True when this replica handles `message` for the thread `key`; False when it went
        to the thread's owner (or could not go anywhere, which is logged)."""
        deadline = time.monotonic() + TAKEOVER_WAIT_S
        while True:
            owner, taken = await self.coord.claim(key)
            if owner == self.coord.replica:
                if taken:
                    await self._forget(key)  # another replica may have moved it on since
                return True
            if await self.coord.send(owner, message):
                return False
            if time.monotonic() > deadline:
                log.error("thread %s: its owner %s neither listens nor lets go", key, owner)
                return False
            await asyncio.sleep(RETRY_S)
