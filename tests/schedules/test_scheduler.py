"""Firing schedules with the clock injected, on both store backends: each firing once however
many replicas tick, a missed firing once and late, wall-clock times across a DST change,
and a schedule paused after three failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from bot.schedules.scheduler import Fired, Firing, Scheduler
from bot.store.base import ScheduleRecord, Store
from tests.store.test_store import new_store  # noqa: F401 - the fixture

WARSAW = "Europe/Warsaw"


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Runs:
    """The fire callback: records each firing, ends it as told."""

    def __init__(self, outcome: str = "finished") -> None:
        self.fired: list[tuple[str, Firing]] = []
        self.outcome = outcome

    def for_replica(self, name: str) -> Callable[[Firing], Awaitable[Fired]]:
        async def fire(firing: Firing) -> Fired:
            self.fired.append((name, firing))
            return Fired(self.outcome, f"run-{len(self.fired)}")

        return fire


@pytest.fixture
async def stores(new_store: Callable[[], Store]) -> AsyncIterator[list[Store]]:  # noqa: F811
    opened = [new_store() for _ in range(3)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


def weekly(created_at: float, **fields: object) -> ScheduleRecord:
    values = {"id": "w", "key": "T1:C1:1.0", "owner": "U1", "cron": "0 9 * * 1", "zone": WARSAW,
              "question": "Orders this week?", "created_at": created_at, **fields}  # fmt: skip
    return ScheduleRecord(**values)  # type: ignore[arg-type]


async def tick_all(schedulers: list[Scheduler]) -> list[Firing]:
    claimed = await asyncio.gather(*(s.tick() for s in schedulers))
    for scheduler in schedulers:
        await scheduler.drain()
    return [f for batch in claimed for f in batch]


async def test_each_firing_runs_once_with_three_replicas_ticking(stores: list[Store]) -> None:
    clock, runs = Clock(at(2026, 11, 30, 7, 0, 0)), Runs()  # Mon 08:00 in Warsaw
    await stores[0].save_schedule(weekly(clock.now))
    schedulers = [
        Scheduler(s, runs.for_replica(f"r{i}"), replica=f"r{i}", clock=clock)
        for i, s in enumerate(stores)
    ]
    assert await tick_all(schedulers) == []  # not due yet
    clock.now = at(2026, 11, 30, 8, 0, 5)  # Mon 09:00:05 in Warsaw
    for _ in range(3):
        await tick_all(schedulers)
    clock.now = at(2026, 12, 7, 8, 0, 1)  # the next Monday
    for _ in range(3):
        await tick_all(schedulers)
    dues = [f.due for _, f in runs.fired]
    assert dues == [datetime(2026, 11, 30, 8, tzinfo=UTC), datetime(2026, 12, 7, 8, tzinfo=UTC)]
    assert not any(f.late for _, f in runs.fired)
    history = await stores[1].firings("w")
    assert [(f.outcome, f.run_id) for f in history] == [
        ("finished", "run-2"),
        ("finished", "run-1"),
    ]


async def test_a_firing_missed_while_down_runs_once_late(stores: list[Store]) -> None:
    clock, runs = Clock(at(2026, 11, 29)), Runs()
    await stores[0].save_schedule(weekly(clock.now))
    clock.now = at(2026, 12, 16, 12)  # down over three Mondays: 30 Nov, 7 and 14 Dec
    scheduler = Scheduler(stores[0], runs.for_replica("r"), replica="r", clock=clock)
    await tick_all([scheduler])
    await tick_all([scheduler])
    [(_, firing)] = runs.fired
    assert firing.due == datetime(2026, 12, 14, 8, tzinfo=UTC)
    assert firing.late and firing.missed == 2


async def test_firings_keep_the_wall_clock_time_across_dst(stores: list[Store]) -> None:
    clock, runs = Clock(at(2026, 10, 18)), Runs()
    await stores[0].save_schedule(weekly(clock.now))
    scheduler = Scheduler(stores[0], runs.for_replica("r"), replica="r", clock=clock)
    for day in (19, 26):  # the clocks went back on Sun 25 Oct
        clock.now = at(2026, 10, day, 12)
        await tick_all([scheduler])
    utc = [f.due for _, f in runs.fired]
    assert utc == [datetime(2026, 10, 19, 7, tzinfo=UTC), datetime(2026, 10, 26, 8, tzinfo=UTC)]
    assert {d.astimezone(ZoneInfo(WARSAW)).strftime("%a %H:%M") for d in utc} == {"Mon 09:00"}


async def test_three_failures_in_a_row_pause_the_schedule(stores: list[Store]) -> None:
    clock, runs = Clock(at(2026, 11, 1)), Runs("failed")
    await stores[0].save_schedule(weekly(clock.now, cron="0 * * * *"))
    told: list[tuple[str, int]] = []

    async def paused(schedule: ScheduleRecord, failures: int) -> None:
        told.append((schedule.id, failures))

    scheduler = Scheduler(stores[0], runs.for_replica("r"), replica="r", clock=clock, paused=paused)
    for hour in range(1, 6):
        clock.now = at(2026, 11, 1, hour, 0, 1)
        await tick_all([scheduler])
    assert len(runs.fired) == 3 and told == [("w", 3)]
    stored = await stores[1].get_schedule("w")
    assert stored is not None and stored.state == "paused"
    assert stored.paused_why == "3 failed firings in a row"


async def test_a_firing_that_raises_counts_as_failed(stores: list[Store]) -> None:
    clock = Clock(at(2026, 11, 30, 8, 0, 1))

    async def broken(firing: Firing) -> Fired:
        raise RuntimeError("the engine is gone")

    await stores[0].save_schedule(weekly(at(2026, 11, 29)))
    scheduler = Scheduler(stores[0], broken, replica="r", clock=clock)
    await tick_all([scheduler])
    [firing] = await stores[0].firings("w")
    assert firing.outcome == "failed"
    assert (await stores[0].get_schedule("w")).failures == 1  # type: ignore[union-attr]


async def test_a_firing_asked_for_now_runs_once_even_when_paused(stores: list[Store]) -> None:
    clock, runs = Clock(at(2026, 12, 2, 12)), Runs()  # a Wednesday: nothing due
    await stores[0].save_schedule(weekly(at(2026, 12, 1), state="paused"))
    await stores[1].update_schedule("w", run_now_at=clock.now - 5)
    schedulers = [
        Scheduler(s, runs.for_replica(f"r{i}"), replica=f"r{i}", clock=clock)
        for i, s in enumerate(stores)
    ]
    for _ in range(3):
        await tick_all(schedulers)
    [(_, firing)] = runs.fired
    assert firing.due == datetime.fromtimestamp(clock.now - 5, UTC) and not firing.late
    stored = await stores[2].get_schedule("w")
    assert stored is not None and stored.run_now_at is None and stored.state == "paused"
