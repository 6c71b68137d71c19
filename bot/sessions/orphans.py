"""Orphan clean-up: destroy the bot's sandboxes that no live session owns.

A crash (or a kill -9) leaves sandboxes behind; this finds them by the bot's tag at start-up
and then periodically. Young sandboxes are spared: one may be booting for a session that
does not know its id yet.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection

from bot.errors import BotError
from bot.sandbox.base import SandboxProvider
from bot.sessions.periodic import Periodic

log = logging.getLogger(__name__)


class OrphanSweeper:
    def __init__(
        self,
        provider: SandboxProvider,
        tag: str,
        owned: Callable[[], Awaitable[Collection[str]]],
        *,
        interval_s: float,
        min_age_s: float,
        clock: Callable[[], float] = time.time,
        turn: Callable[[], Awaitable[bool]] | None = None,
        also: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        """`also`: more clean-up each pass, given the time (the snapshot sweep)."""
        self._also = also
        self._provider = provider
        self._tag = tag
        self._owned = owned
        self._min_age_s = min_age_s
        self._clock = clock
        self._job = Periodic("the orphan sweep", self.sweep, interval_s, turn)

    async def sweep(self) -> list[str]:
        """One pass; returns the ids it destroyed. Failures are logged, never raised."""
        try:
            found = await self._provider.list_tagged(self._tag)
        except BotError as exc:
            log.warning("orphan sweep could not list sandboxes: %s", exc)
            return []
        owned, now = set(await self._owned()), self._clock()
        doomed = [
            info.id
            for info in found
            if info.id not in owned
            and (info.created_at is None or now - info.created_at >= self._min_age_s)
        ]
        destroyed = []
        for sandbox_id in doomed:
            try:
                await self._provider.destroy_id(sandbox_id)
            except BotError as exc:
                log.warning("could not destroy orphan sandbox %s: %s", sandbox_id, exc)
            else:
                destroyed.append(sandbox_id)
        if destroyed:
            log.info("destroyed %d orphan sandbox(es): %s", len(destroyed), ", ".join(destroyed))
        if self._also is not None:
            await self._also(now)
        return destroyed

    def start(self) -> None:
        """Sweep now and then every interval, in the background."""
        self._job.start()

    async def stop(self) -> None:
        await self._job.stop()
