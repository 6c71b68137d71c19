"""The warm pool's records on both backends: members are taken oldest first, and however
many callers race (two stores stand for two replicas), each member is taken once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from bot.store.base import Store
from tests.store.test_store import new_store  # noqa: F401 - the fixture


async def test_each_member_is_taken_once_under_a_race(new_store: Callable[[], Store]) -> None:  # noqa: F811
    one, two = new_store(), new_store()
    await one.open()
    await two.open()
    try:
        for n, sandbox_id in enumerate(["sb-c", "sb-a", "sb-b"]):
            await one.pool_add(sandbox_id, 100.0 + n)
        await one.pool_add("sb-c", 500.0)  # added again: still one member, as first added
        takers = [store.pool_claim(200.0 + i) for i in range(10) for store in (one, two)]
        taken = [t for t in await asyncio.gather(*takers) if t is not None]
        assert sorted(taken) == ["sb-a", "sb-b", "sb-c"]
        assert await one.pool_claim(300.0) is None
        records = await two.pool()
        assert {r.sandbox_id for r in records} == {"sb-a", "sb-b", "sb-c"}
        assert all(r.claimed_at is not None and r.claimed_at >= 200.0 for r in records)
        await two.pool_forget("sb-a")
        await two.pool_forget("sb-zz")  # not there: nothing to do
        assert [r.sandbox_id for r in await one.pool()] != [] and "sb-a" not in {
            r.sandbox_id for r in await one.pool()
        }
    finally:
        await one.close()
        await two.close()


async def test_the_oldest_free_member_goes_first(new_store: Callable[[], Store]) -> None:  # noqa: F811
    store = new_store()
    await store.open()
    try:
        await store.pool_add("young", 20.0)
        await store.pool_add("old", 10.0)
        assert [r.claimed_at for r in await store.pool()] == [None, None]
        assert await store.pool_claim(30.0) == "old"
        assert [(r.sandbox_id, r.claimed_at) for r in await store.pool()][-1] == ("young", None)
        assert await store.pool_claim(31.0) == "young"
    finally:
        await store.close()


async def test_a_threads_snapshot_is_kept_until_it_is_cleared(
    new_store: Callable[[], Store],  # noqa: F811
) -> None:
    one, two = new_store(), new_store()
    await one.open()
    await two.open()
    try:
        assert await one.snapshot_of("T:C:1") is None
        await one.set_snapshot("T:C:1", "snap-a")
        await one.set_snapshot("T:C:2", "snap-b")
        await one.set_snapshot("T:C:1", "snap-c")  # a newer one replaces it
        assert await two.snapshot_of("T:C:1") == "snap-c"
        assert await two.snapshots() == {"T:C:1": "snap-c", "T:C:2": "snap-b"}
        await two.set_snapshot("T:C:2", None)
        await two.set_snapshot("T:C:9", None)  # none there: nothing to do
        assert await one.snapshots() == {"T:C:1": "snap-c"}
    finally:
        await one.close()
        await two.close()
