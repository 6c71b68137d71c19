"""Schedules in the store, on both backends: round trips, updates, and each firing claimed
by exactly one of many racing stores (as replicas would race)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import pytest

from bot.store.base import NotFound, ScheduleRecord, Store
from tests.store.test_store import new_store  # noqa: F401 - the fixture

SCHEDULE = ScheduleRecord(
    id="s1",
    key="T1:C1:1.0",
    owner="U1",
    cron="0 9 * * 1",
    zone="Europe/Warsaw",
    question="How many orders this week? \ud800",
    created_at=1000.0,
)


@pytest.fixture
async def stores(new_store: Callable[[], Store]) -> AsyncIterator[list[Store]]:  # noqa: F811
    opened = [new_store() for _ in range(4)]
    for store in opened:
        await store.open()
    yield opened
    for store in opened:
        await store.close()


async def test_a_schedule_round_trips_and_updates(stores: list[Store]) -> None:
    store, other = stores[0], stores[1]
    await store.save_schedule(SCHEDULE)
    later = replace(SCHEDULE, id="s2", created_at=2000.0)
    await store.save_schedule(later)
    got = await other.get_schedule("s1")
    assert got == replace(SCHEDULE, question="How many orders this week? ?")
    assert [s.id for s in await other.list_schedules()] == ["s1", "s2"]
    await store.update_schedule("s1", state="paused", paused_why="3 failures")
    assert (await other.get_schedule("s1")).state == "paused"  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        await store.update_schedule("nope", state="paused")
    with pytest.raises(TypeError):
        await store.update_schedule("s1", owner="U2")
    with pytest.raises(ValueError):
        await store.update_schedule("s1", state="gone")
    await store.delete_schedule("s2")
    assert await other.get_schedule("s2") is None
    assert [s.id for s in await other.list_schedules()] == ["s1"]


async def test_each_firing_is_claimed_once_however_many_race(stores: list[Store]) -> None:
    await stores[0].save_schedule(SCHEDULE)
    due = [1_796_000_000.0 + 3600 * i for i in range(10)]

    async def race(fire_at: float) -> list[bool]:
        return await asyncio.gather(
            *(s.claim_firing("s1", fire_at, f"replica-{i}", 5.0) for i, s in enumerate(stores))
        )

    results = [await race(fire_at) for fire_at in due]
    assert all(sum(won) == 1 for won in results), results
    assert (await stores[1].get_schedule("s1")).last_fire_at == due[-1]  # type: ignore[union-attr]
    # An older due time claimed late does not move last_fire_at back.
    assert await stores[2].claim_firing("s1", due[0] - 3600, "replica-2", 6.0)
    assert (await stores[1].get_schedule("s1")).last_fire_at == due[-1]  # type: ignore[union-attr]
    # A schedule that is gone is never claimed.
    assert not await stores[0].claim_firing("nope", due[0], "replica-0", 5.0)
    firings = await stores[3].firings("s1", limit=3)
    assert [f.fire_at for f in firings] == due[::-1][:3]
    assert all(f.outcome == "" for f in firings)


async def test_failures_in_a_row_are_counted_and_reset(stores: list[Store]) -> None:
    store = stores[0]
    await store.save_schedule(SCHEDULE)
    counts = []
    for i, outcome in enumerate(["failed", "failed", "finished", "failed", "failed", "failed"]):
        await store.claim_firing("s1", float(i), "r", float(i))
        counts.append(await store.end_firing("s1", float(i), outcome, f"run{i}"))
    assert counts == [1, 2, 0, 1, 2, 3]
    # A firing ended twice (a retry of the write) counts once.
    assert await store.end_firing("s1", 5.0, "failed") == 3
    [last] = await stores[1].firings("s1", limit=1)
    assert (last.fire_at, last.outcome, last.run_id, last.claimed_by) == (
        5.0,
        "failed",
        "run5",
        "r",
    )
    await store.delete_schedule("s1")
    with pytest.raises(NotFound):
        await store.end_firing("s1", 5.0, "failed")
    assert await store.firings("s1") == []
