"""Retention: the store's done sessions and old runs deleted now and then, in the background.

Every replica may run it (one does at a time when they share a Redis, by a job lease); two
at once are harmless, since the store checks each session again as it deletes it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.sessions.periodic import Periodic
from bot.settings import Settings
from bot.store.base import Pruned, UpkeepStore

log = logging.getLogger(__name__)

DAY_S = 86_400.0


@dataclass(frozen=True)
class Retention:
    """How long the store keeps done sessions and ended runs, in days (0: forever)."""

    session_days: float
    audit_days: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Retention:
        return cls(settings.session_retention_days, settings.audit_retention_days)

    @property
    def off(self) -> bool:
        return not self.session_days and not self.audit_days

    def cutoffs(self, now: float) -> tuple[float | None, float | None]:
        """Sessions quiet since before the first, and runs ended before the second, go."""
        return _before(now, self.session_days), _before(now, self.audit_days)


def redis_ttl_s(settings: Settings) -> int:
    """The TTL of a thread's Redis keys, set again on each write: longer than retention plus
    the time a quiet thread's sandbox may be kept (SESSION_RETAIN_S), so retention decides
    what goes and the TTL only takes what is abandoned. 0 (none) when anything is kept
    forever."""
    retention = Retention.from_settings(settings)
    if not retention.session_days or not retention.audit_days:
        return 0
    longest = max(retention.session_days, retention.audit_days) * DAY_S
    return int(longest + settings.session_idle_timeout + settings.session_retain_s)


class Pruner:
    def __init__(
        self,
        store: UpkeepStore,
        retention: Retention,
        *,
        interval_s: float,
        clock: Callable[[], float] = time.time,
        turn: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._store = store
        self._retention = retention
        self._clock = clock
        self._job = Periodic("pruning the store", self.prune, interval_s, turn)

    async def prune(self) -> Pruned:
        """One pass; what it removed."""
        pruned = await self._store.prune(*self._retention.cutoffs(self._clock()))
        if pruned != Pruned():
            log.info(
                "retention removed %d sessions, %d runs, %d tool calls, %d feedback",
                pruned.sessions, pruned.runs, pruned.tool_calls, pruned.feedback,
            )  # fmt: skip
        return pruned

    def start(self) -> None:
        """Prune now and then every interval, in the background (not at all when retention
        is off)."""
        if not self._retention.off:
            self._job.start()

    async def stop(self) -> None:
        await self._job.stop()


def _before(now: float, days: float) -> float | None:
    return now - days * DAY_S if days else None
