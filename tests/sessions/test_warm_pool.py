"""The warm pool: filled with booted sandboxes whose kernels have made their imports, each
member taken once however many replicas claim at once, refilled within the provider's
room, and nothing leaked when a process dies between making a member and recording it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from bot.sessions.orphans import OrphanSweeper
from bot.sessions.pool import POOL_TAG, WarmPool
from bot.store.base import Store
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore
from tests.fakes.buddy import FakeBuddy
from tests.redis_server import redis_url
from tests.support import local_provider_at

TAG = "bot"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    made = SqliteStore(tmp_path / "store.db")
    await made.open()
    yield made
    await made.close()


async def test_a_claimed_member_is_warm_and_the_pool_refills(
    sandbox_root: Path, store: Store
) -> None:
    provider = local_provider_at(sandbox_root)
    pool = WarmPool(provider, store, 2, tag=TAG, warm_imports=("pandas",))
    try:
        assert await pool.fill() == 2
        assert await pool.fill() == 0  # full
        members = await pool.owned()
        assert {i.id for i in await provider.list_tagged(POOL_TAG)} == members
        taken = await pool.claim()
        assert taken is not None and taken.id in members
        first = await taken.run_code("python", "import sys\nprint('pandas' in sys.modules)", 20)
        assert (first.stdout.text, first.kernel) == ("True\n", "started")
        assert await pool.fill() == 1
        free = [r for r in await store.pool() if r.claimed_at is None]
        assert len(free) == 2 and taken.id not in {r.sandbox_id for r in free}
    finally:
        await provider.close()


async def test_the_pool_fills_only_within_the_sandbox_cap(sandbox_root: Path, store: Store) -> None:
    provider = local_provider_at(sandbox_root, max_sandboxes=2)
    try:
        await provider.create(SandboxSpec("a thread", tags=(TAG,)))
        assert await WarmPool(provider, store, 3, tag=TAG).fill() == 1
        assert not provider.has_room()
    finally:
        await provider.close()


async def test_a_lowered_size_destroys_the_extra_members(sandbox_root: Path, store: Store) -> None:
    provider = local_provider_at(sandbox_root)
    try:
        assert await WarmPool(provider, store, 3, tag=TAG).fill() == 3
        assert await WarmPool(provider, store, 1, tag=TAG).fill() == 0
        assert len(await provider.list_tagged(POOL_TAG)) == 1
        assert len(await store.pool()) == 1
    finally:
        await provider.close()


async def test_a_crash_leaks_nothing(sandbox_root: Path, store: Store) -> None:
    provider = local_provider_at(sandbox_root)
    try:
        pool = WarmPool(provider, store, 2, tag=TAG)
        await pool.fill()
        # died between making a member and recording it
        unrecorded = await provider.create(SandboxSpec("pool-x", tags=(TAG, POOL_TAG)))
        # the oldest recorded member went away behind the pool's back
        [gone, kept] = [r.sandbox_id for r in await store.pool()]
        await provider.destroy_id(gone)
        later = time.time() + 3600
        sweeper = OrphanSweeper(
            provider, TAG, pool.owned, interval_s=60, min_age_s=600, clock=lambda: later
        )
        assert await sweeper.sweep() == [unrecorded.id]
        again = WarmPool(provider, store, 2, tag=TAG)  # the next process: it attaches
        taken = await again.claim()
        assert taken is not None and taken.id == kept
        assert [r.sandbox_id for r in await store.pool()] == [kept]  # the gone one forgotten
        assert (await taken.run_code("bash", "echo ok", 10)).stdout.text == "ok\n"
    finally:
        await provider.close()


async def test_two_replicas_take_each_member_once(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake, redis_url() as url:
        config = lambda: BuddyConfig(  # noqa: E731
            token=fake.token, workspace=fake.workspace, project=fake.project,
            api_url=fake.base_url, retry_base_delay_s=0.01, poll_interval_s=0.02,
        )  # fmt: skip
        providers = [BuddyProvider(config()), BuddyProvider(config())]
        stores = [RedisStore(url), RedisStore(url)]
        for s in stores:
            await s.open()
        try:
            pools = [WarmPool(p, s, 3, tag=TAG) for p, s in zip(providers, stores, strict=True)]
            assert await pools[0].fill() == 3  # the replica whose turn it is
            made = await pools[0].owned()
            claims = [pool.claim() for _ in range(4) for pool in pools]
            taken = [s for s in await asyncio.gather(*claims) if s is not None]
            assert sorted(s.id for s in taken) == sorted(made)  # three, each once
            # a member made by the other replica is attached; its first cell starts a kernel
            # like a new sandbox's, without a note that state was lost
            results = await asyncio.gather(*(s.run_code("python", "print(1)", 20) for s in taken))
            assert {r.kernel for r in results} == {"started"}
        finally:
            for s in stores:
                await s.close()
            for p in providers:
                await p.close()


async def test_free_members_on_buddy_are_kept_awake(sandbox_root: Path, store: Store) -> None:
    now = [1000.0]
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake:
        provider = BuddyProvider(
            BuddyConfig(
                token=fake.token, workspace=fake.workspace, project=fake.project,
                api_url=fake.base_url, retry_base_delay_s=0.01, poll_interval_s=0.02,
            )
        )  # fmt: skip
        try:
            pool = WarmPool(provider, store, 1, tag=TAG, keep_awake_s=300, clock=lambda: now[0])
            await pool.fill()
            [member] = await pool.owned()
            commands = lambda: len(fake.sandboxes[member].commands)  # noqa: E731
            made = commands()
            now[0] += 299  # not idle long enough yet
            await pool.fill()
            assert commands() == made
            now[0] += 2
            await pool.fill()
            assert commands() == made + 1
            await pool.fill()  # just kept awake: nothing more
            assert commands() == made + 1
        finally:
            await provider.close()
