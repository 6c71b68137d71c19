"""The reaper's pass and the orphan sweeper's question read only the sessions that may need
them (those naming a sandbox, those held in memory), not every session ever stored: counted
at the Store (a wrapper of our own) and, on Redis, at the server (its keyspace hits)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.sandbox.base import MakeRoom, Sandbox, SandboxInfo, SandboxSpec
from bot.sessions.lifecycle import Lifecycle, Upkeep
from bot.sessions.thread_table import ThreadTable
from bot.store import SqliteStore, Store
from bot.store.redis_store import RedisStore
from tests.counting_store import counting
from tests.redis_server import redis_server
from tests.store.test_store import session

NOW = 1_000_000.0
IDLE_S = 900.0
DONE = 300  # sessions done long ago: no sandbox


class RecordingProvider:
    """Sandboxes by id only: records what the reaper deletes."""

    def __init__(self) -> None:
        self.destroyed: list[str] = []

    async def create(self, spec: SandboxSpec) -> Sandbox:
        raise AssertionError("the reaper makes no sandbox")

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        return None

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        return []

    def has_room(self) -> bool:
        return True

    def waiting_for_slot(self, session_key: str) -> int:
        return 0

    def on_full(self, make_room: MakeRoom) -> None:
        pass  # no cap on sandboxes here

    async def destroy_id(self, sandbox_id: str) -> None:
        self.destroyed.append(sandbox_id)

    async def close(self) -> None:
        pass


@pytest.fixture(params=["sqlite", "redis"])
async def backing(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """(the store, a Redis client to its server or None)."""
    if request.param == "sqlite":
        store = SqliteStore(tmp_path / "s.db")
        await store.open()
        yield store, None
        await store.close()
        return
    async with redis_server(tmp_path / "redis") as server:
        store = RedisStore(server.url)
        await store.open()
        redis = Redis.from_url(server.url, decode_responses=True)
        yield store, redis
        await redis.aclose()
        await store.close()


async def fill(store: Store) -> None:
    for n in range(DONE):
        old = NOW - 200 * 86_400 - n
        await store.save_session(session(f"T1:C2:{n}.0", last=old, sandbox_id=None, state="idle"))
    for n in range(3):  # quiet past the idle timeout, sandbox still up: reaped
        await store.save_session(session(f"T1:C1:{n}.0", last=NOW - 2 * IDLE_S, sandbox_id=f"q{n}"))
    for n in range(2):  # used just now: left alone
        await store.save_session(session(f"T1:C1:{n}.9", last=NOW - 1, sandbox_id=f"b{n}"))


async def keys_read(redis: Redis | None) -> int:
    if redis is None:
        return 0
    stats = await redis.info("stats")
    return int(stats["keyspace_hits"]) + int(stats["keyspace_misses"])


async def test_a_reaper_pass_reads_only_the_sessions_that_may_need_it(backing: Any) -> None:
    store, redis = backing
    await fill(store)
    wrapped, counter = counting(store)
    provider = RecordingProvider()

    async def told(event: object) -> None:
        pass

    class NothingLoaded(ThreadTable):
        async def load(self, key: str, repo_url: str | None = None) -> Any:
            raise AssertionError("nothing is loaded")

    threads = NothingLoaded(wrapped, sessions=None, opener_for=None)  # type: ignore[arg-type]
    lifecycle = Lifecycle(
        threads, wrapped, provider, lambda key: told,  # type: ignore[arg-type]
        upkeep=Upkeep(IDLE_S), clock=lambda: NOW,
    )  # fmt: skip
    if redis is not None:
        await redis.config_resetstat()
    reaped = await lifecycle.reap()
    assert sorted(reaped) == ["T1:C1:0.0", "T1:C1:1.0", "T1:C1:2.0"]
    assert sorted(provider.destroyed) == ["q0", "q1", "q2"]
    assert counter.total <= 3, counter.sessions_read
    # Each reaped session: its hash read, then written (3 keys each), and the indexes.
    assert await keys_read(redis) < 40

    counter.reset()
    assert await lifecycle.owned_sandbox_ids() == {"b0", "b1"}
    assert counter.total == 2, counter.sessions_read

    counter.reset()
    assert await lifecycle.reap() == []  # nothing more to do, and nothing else read
    assert counter.total == 0, counter.sessions_read
    record = await store.get_session("T1:C1:0.0")
    assert dataclasses.astuple(record)[1:3] == (None, "idle")
