"""Each thread's events handled by the replica that owns it (bot/coord). A replica that
receives an event for a thread another replica owns passes it to that replica's inbox;
with one process every thread is its own. An owner nobody hears twice in a row (every
live replica listens to its inbox) died: its thread is taken over at once rather than
after its lease lapses, so a dead idle replica costs its threads' users nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.coord.base import Coordinator

log = logging.getLogger(__name__)

TAKEOVER_MARGIN_S = 5.0  # past the lease: a silent owner's lease has lapsed by then
RETRY_S = 0.5
SILENT_TIMES = 2  # a pub/sub message reaches every replica that listens, or none

Adopt = Callable[[str], Awaitable[object]]  # a thread just taken over: drop what is stale


class Router:
    def __init__(self, coord: Coordinator, adopt: Adopt) -> None:
        self.coord = coord
        self._adopt = adopt

    async def here(self, key: str, message: dict[str, Any]) -> bool:
        """True when this replica handles `message` for the thread `key`; False when it went
        to the thread's owner (or could not go anywhere, which is logged)."""
        deadline = time.monotonic() + self.coord.lease_s + TAKEOVER_MARGIN_S
        silent = 0
        while True:
            owner, taken = await self.coord.claim(key)
            if owner == self.coord.replica:
                if taken:
                    await self._adopt(key)  # another replica may have moved it on since
                return True
            if await self.coord.send(owner, message):
                return False
            silent += 1
            if silent >= SILENT_TIMES and await self.coord.take_from(key, owner):
                log.warning("thread %s: replica %s is gone; taken over here", key, owner)
                await self._adopt(key)
                return True
            if time.monotonic() > deadline:
                log.error("thread %s: its owner %s neither listens nor lets go", key, owner)
                return False
            await asyncio.sleep(RETRY_S)
