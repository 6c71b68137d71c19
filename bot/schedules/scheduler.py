"""Firing schedules: every replica ticks, and each firing is claimed in the store by its
(schedule, due time), so exactly one replica runs it.

A firing missed while every replica was down runs once, late, and says how many it stands
for: no backfill storm. A firing runs as a run of its thread through the engine, so one
thread's runs never overlap (a firing waits for a person's run, as a question does) and a
replica killed mid-run is taken over as any run is. After `max_failures` failed firings in
a row the schedule pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.schedules.cadence import Cadence
from bot.store.base import ScheduleRecord, ScheduleStore

log = logging.getLogger(__name__)

LATE_AFTER_S = 120.0  # a firing claimed later than this after its due time says it is late
MAX_FAILURES = 3


@dataclass(frozen=True)
class Firing:
    schedule: ScheduleRecord
    due: datetime  # UTC
    late: bool  # claimed well after its due time: the bot was down
    missed: int = 0  # earlier due times it stands for (not run: no backfill)


@dataclass(frozen=True)
class Fired:
    """How a firing's run ended: a RunOutcome ("finished", "failed", …) and its run; or
    HANDED_OFF, when the replica that holds the thread runs it (and finishes it there)."""

    outcome: str
    run_id: str = ""
    cost_usd: float = 0.0


HANDED_OFF = "handed_off"


Fire = Callable[[Firing], Awaitable[Fired]]
Paused = Callable[[ScheduleRecord, int], Awaitable[None]]


class Scheduler:
    def __init__(
        self,
        store: ScheduleStore,
        fire: Fire,
        *,
        replica: str,
        clock: Callable[[], float] = time.time,
        paused: Paused | None = None,
        max_failures: int = MAX_FAILURES,
        late_after_s: float = LATE_AFTER_S,
    ) -> None:
        """`fire` runs a firing (as a run of its thread) and says how it ended; `paused`
        is told of a schedule paused for its failures."""
        self._store = store
        self._fire = fire
        self._replica = replica
        self._clock = clock
        self._paused = paused
        self._max_failures = max_failures
        self._late_after_s = late_after_s
        self._running: set[asyncio.Task[None]] = set()

    async def tick(self) -> list[Firing]:
        """Claim every firing due now and start it; the ones this replica claimed."""
        now = self._clock()
        claimed = []
        for schedule in await self._store.list_schedules():
            firing = self.due(schedule, now)
            if firing is None:
                continue
            won = await self._store.claim_firing(
                schedule.id, firing.due.timestamp(), self._replica, now
            )
            if firing.due.timestamp() == schedule.run_now_at:
                await self._store.update_schedule(schedule.id, run_now_at=None)
            if won:
                claimed.append(firing)
                task = asyncio.create_task(self._run(firing))
                self._running.add(task)
                task.add_done_callback(self._running.discard)
        return claimed

    def due(self, schedule: ScheduleRecord, now: float) -> Firing | None:
        """The firing of `schedule` due at `now`, if any: the latest due time since its
        last firing (or its creation), standing for any missed before it."""
        if schedule.run_now_at is not None and schedule.state != "proposed":
            return Firing(schedule, _utc(schedule.run_now_at), late=False)
        if schedule.state != "active":
            return None
        cadence = Cadence(schedule.cron, schedule.zone)
        after = _utc(
            schedule.last_fire_at if schedule.last_fire_at is not None else schedule.created_at
        )
        due = cadence.latest_due(after, _utc(now))
        if due is None:
            return None
        missed, at = 0, cadence.next_after(after)
        while at < due:
            missed, at = missed + 1, cadence.next_after(at)
        return Firing(schedule, due, now - due.timestamp() > self._late_after_s, missed)

    async def _run(self, firing: Firing) -> None:
        schedule = firing.schedule
        try:
            fired = await self._fire(firing)
        except Exception:  # the run itself reports what it can; here it only counts
            log.exception("schedule %s: the firing at %s failed", schedule.id, firing.due)
            fired = Fired("failed")
        if fired.outcome != HANDED_OFF:
            await self.finish(firing, fired)

    async def finish(self, firing: Firing, fired: Fired) -> None:
        """Record how a firing ended (on whichever replica ran it); pause its schedule at
        `max_failures` failures in a row."""
        schedule = firing.schedule
        failures = await self._store.end_firing(
            schedule.id, firing.due.timestamp(), fired.outcome, fired.run_id, fired.cost_usd
        )
        if fired.outcome == "failed" and failures >= self._max_failures:
            why = f"{failures} failed firings in a row"
            await self._store.update_schedule(schedule.id, state="paused", paused_why=why)
            if self._paused is not None:
                await self._paused(schedule, failures)

    async def drain(self) -> None:
        """Wait for the firings this replica started (tests; shutdown)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def run(self, interval_s: float, stop: asyncio.Event) -> None:
        """Tick every `interval_s` until `stop` is set."""
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:  # a store blip: the next tick tries again
                log.exception("scheduler tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)


def _utc(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)
