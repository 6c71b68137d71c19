"""Retention and the reaper's index, on both stores (a SQLite file, a private redis-server):
what is done goes, what is live or recent stays, a pass reads only the sessions that may need
it, Redis keys expire by themselves, and VACUUM gives SQLite's space back."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bot.store import Pruned, SqliteStore, Store
from bot.store.redis_store import RedisStore
from bot.store.sqlite_prune import _HOLDING
from bot.store.sqlite_schema import connect
from tests.redis_server import redis_server
from tests.store.test_store import file_record, session, tool_call

DAY = 86_400.0
NOW = 1_000 * DAY
CUTOFF = NOW - 90 * DAY  # both retentions: 90 days
OLD, RECENT = NOW - 100 * DAY, NOW - DAY


@pytest.fixture(params=["sqlite", "redis"])
async def new_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Store]]:
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "store.db")
        return
    async with redis_server(tmp_path / "redis") as server:
        yield lambda: RedisStore(server.url, ttl_s=400 * 86_400)


@pytest.fixture
async def store(new_store: Callable[[], Store]) -> AsyncIterator[Store]:
    store = new_store()
    await store.open()
    yield store
    await store.close()


async def run(store: Store, key: str, run_id: str, at: float, *, ended: bool = True) -> None:
    """A run with a priced turn, a tool call and a rating (if it ended)."""
    await store.start_run(key, run_id, f"question {run_id}", at, "U1")
    await store.add_turn(key, run_id, {"input_tokens": 10}, 0.25, at)
    await store.add_tool_call(key, dataclasses.replace(tool_call(run_id, 1), at=at))
    if ended:
        await store.end_run(run_id, "finished", at + 1)
        await store.add_feedback(run_id, "U2", "good", at + 2)


async def populate(store: Store) -> dict[str, str]:
    """Sessions of every kind; returns their keys by kind."""
    keys = {
        "done": "T1:C1:1.0",  # quiet 100 days, no sandbox: goes
        "kept": "T1:C1:2.0",  # quiet 100 days, its stopped sandbox kept: stays
        "running": "T1:C1:3.0",  # quiet 100 days, a run in flight: stays
        "recent": "T1:C1:4.0",  # active yesterday, with a run of 100 days ago: stays
    }
    for kind, key in keys.items():
        holds = "sb-kept" if kind == "kept" else None
        last = RECENT if kind == "recent" else OLD
        state = "active" if holds else "idle"
        await store.save_session(session(key, last=last, sandbox_id=holds, state=state))
    await store.save_history(keys["done"], [{"role": "user", "content": "hi"}])
    await store.add_file(keys["done"], file_record(1))
    await store.enqueue(keys["done"], "later?", "U1", OLD)
    await store.grant_once(keys["done"], "g1", 1.0)
    await store.fence(keys["done"])
    await run(store, keys["done"], "r-done", OLD)
    await run(store, keys["kept"], "r-kept", OLD)
    await run(store, keys["running"], "r-running", OLD, ended=False)
    await run(store, keys["recent"], "r-ancient", OLD)
    await run(store, keys["recent"], "r-new", RECENT)
    return keys


EXPECTED = Pruned(sessions=1, runs=3, tool_calls=3, feedback=3)  # r-done, r-kept, r-ancient


async def test_prune_removes_what_is_done_and_keeps_what_is_live_or_recent(store: Store) -> None:
    keys = await populate(store)
    assert await store.prune(CUTOFF, CUTOFF, dry_run=True) == EXPECTED
    assert await store.get_run("r-done") is not None  # a dry run removes nothing

    assert await store.prune(CUTOFF, CUTOFF) == EXPECTED
    done = keys["done"]
    assert await store.get_session(done) is None
    assert await store.load_history(done) == []
    assert await store.files(done) == [] and await store.tool_calls(done) == []
    assert await store.feedback(done) == [] and await store.archived_history(done) == []
    assert [await store.get_run(r) for r in ("r-done", "r-kept", "r-ancient")] == [None] * 3
    assert await store.spent(key=done) == 0.0

    for kind in ("kept", "running", "recent"):
        assert await store.get_session(keys[kind]) is not None
    assert [r.run_id for r in await store.runs_in_flight()] == ["r-running"]
    recent = keys["recent"]
    assert [r.run_id for r in await store.runs(recent)] == ["r-new"]
    assert [c.run_id for c in await store.tool_calls(recent)] == ["r-new"]
    assert [f.run_id for f in await store.feedback(recent)] == ["r-new"]
    assert await store.spent(key=recent) == 0.25  # the old run's turn went with it
    assert await store.spent(user="U1") == 0.5  # r-new's, and r-running's (in flight)
    assert await store.prune(CUTOFF, CUTOFF) == Pruned()  # nothing more


async def test_a_kept_sandbox_keeps_its_session_until_the_sandbox_is_gone(store: Store) -> None:
    keys = await populate(store)
    await store.prune(CUTOFF, CUTOFF)
    assert await store.get_session(keys["kept"]) is not None
    await store.update_session(keys["kept"], sandbox_id=None, state="idle")  # deleted at last
    assert await store.prune(CUTOFF, CUTOFF) == Pruned(sessions=1)
    assert await store.get_session(keys["kept"]) is None
    # The run in flight ends: its session is done too.
    await store.end_run("r-running", "interrupted", OLD + 5)
    assert await store.prune(CUTOFF, None) == Pruned(1, 1, 1, 0)
    assert await store.runs_in_flight() == []


async def test_retention_off_keeps_everything(store: Store) -> None:
    await populate(store)
    assert await store.prune(None, None) == Pruned()
    assert await store.get_run("r-done") is not None


async def test_two_processes_pruning_at_once_remove_each_thing_once(
    new_store: Callable[[], Store],
) -> None:
    first, second = new_store(), new_store()
    await first.open()
    await second.open()
    try:
        for n in range(120):  # more than a batch
            await first.save_session(session(f"T1:C1:{n}.5", last=OLD, sandbox_id=None))
            await run(first, f"T1:C1:{n}.5", f"r{n}", OLD)
        await first.save_session(session("T1:C1:live.5", last=RECENT))
        results = await asyncio.gather(first.prune(CUTOFF, CUTOFF), second.prune(CUTOFF, CUTOFF))
        total = results[0] + results[1]
        assert total.sessions == 120 and total.runs == 120 and total.feedback == 120
        assert [r.key for r in await first.list_sessions()] == ["T1:C1:live.5"]
    finally:
        await first.close()
        await second.close()


async def test_the_reaper_index_holds_only_sessions_naming_a_sandbox(store: Store) -> None:
    await store.save_session(session("T1:C1:1.0", last=OLD, sandbox_id=None, state="idle"))
    await store.save_session(session("T1:C1:2.0", last=OLD, sandbox_id="sb-2"))
    await store.save_session(session("T1:C1:3.0", last=RECENT, sandbox_id="sb-3"))
    await store.save_session(session("T1:C1:4.0", last=OLD, sandbox_id="sb-4"))

    def keys(records: list) -> list[str]:
        return [r.key for r in records]

    assert keys(await store.sessions_holding_sandboxes()) == ["T1:C1:3.0", "T1:C1:2.0", "T1:C1:4.0"]
    assert keys(await store.sessions_holding_sandboxes(NOW - 50 * DAY)) == [
        "T1:C1:2.0",
        "T1:C1:4.0",
    ]
    await store.update_session("T1:C1:2.0", sandbox_id=None, state="idle")
    await store.update_session("T1:C1:4.0", last_activity=NOW)
    await store.update_session("T1:C1:1.0", sandbox_id="sb-1", state="active")
    assert keys(await store.sessions_holding_sandboxes(NOW - 50 * DAY)) == ["T1:C1:1.0"]
    assert keys(await store.sessions_holding_sandboxes()) == ["T1:C1:4.0", "T1:C1:3.0", "T1:C1:1.0"]


# SQLite only.


async def test_the_reaper_query_uses_the_partial_index(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    await store.close()
    conn = connect(tmp_path / "s.db")
    try:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {_HOLDING} AND last_activity <= 1", ()).fetchall()
    finally:
        conn.close()
    text = " ".join(str(row[-1]) for row in plan)
    assert "sessions_with_sandbox" in text and "SCAN sessions" not in text


async def test_vacuum_gives_the_space_of_pruned_sessions_back(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    store = SqliteStore(path)
    await store.open()
    try:
        big = [{"role": "user", "content": "x" * 20_000}]
        for n in range(200):
            await store.save_session(session(f"T1:C1:{n}.0", last=OLD, sandbox_id=None))
            await store.save_history(f"T1:C1:{n}.0", big)
        await store.vacuum()  # the WAL folded in: the size of the data itself
        before = path.stat().st_size
        assert (await store.prune(CUTOFF, CUTOFF)).sessions == 200
        await store.vacuum()
        after = sum(p.stat().st_size for p in tmp_path.glob("big.db*"))
    finally:
        await store.close()
    assert before > 4_000_000 and after < before / 10


# Redis only: TTLs.


async def test_a_threads_redis_keys_carry_a_ttl_and_the_store_wide_ones_none(
    tmp_path: Path,
) -> None:
    async with redis_server(tmp_path / "redis") as server:
        store = RedisStore(server.url, ttl_s=1_000)
        await store.open()
        try:
            await populate(store)
            await store.update_session("T1:C1:4.0", canvas='{"id": "F1"}')
            await store.save_history("T1:C1:4.0", [], archive={"why": "cleared"})
            await store.record_figures("r-new", [])
            await store.request_stop("r-running", "U3")
        finally:
            await store.close()
        redis = Redis.from_url(server.url, decode_responses=True)
        try:
            names = [name async for name in redis.scan_iter("sci:*")]
            ttls = {name: await redis.ttl(name) for name in names}
        finally:
            await redis.aclose()
    shared = set(store.keys.shared)
    assert {n for n in names if n not in shared} and shared & set(names)
    assert {n: t for n, t in ttls.items() if n in shared and t != -1} == {}
    assert {n: t for n, t in ttls.items() if n not in shared and not 0 < t <= 1_000} == {}


async def test_an_abandoned_session_expires_by_itself_and_prune_clears_its_traces(
    tmp_path: Path,
) -> None:
    async with redis_server(tmp_path / "redis") as server:
        store = RedisStore(server.url, ttl_s=1)
        await store.open()
        try:
            key = "T1:C1:9.0"
            await store.save_session(session(key, last=OLD, sandbox_id="sb-9"))
            await run(store, key, "r9", OLD)
            async with asyncio.timeout(30):
                while await store.get_session(key) is not None:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
            assert await store.prune(CUTOFF, CUTOFF) == Pruned()  # only traces were left
            assert await store.sessions_holding_sandboxes() == []
            redis = Redis.from_url(server.url, decode_responses=True)
            try:
                left = [name async for name in redis.scan_iter("sci:*")]
            finally:
                await redis.aclose()
        finally:
            await store.close()
    assert sorted(left) == ["sci:ids:turn", "sci:schema"]


async def test_a_redis_store_of_the_first_layout_gets_its_indexes_at_open(
    tmp_path: Path,
) -> None:
    async with redis_server(tmp_path / "redis") as server:
        store = RedisStore(server.url)
        await store.open()
        await populate(store)
        await store.close()
        redis = Redis.from_url(server.url, decode_responses=True)
        try:  # as the first layout had it: no indexes
            indexes = [n async for n in redis.scan_iter("sci:session_runs:*")]
            keys = store.keys
            await redis.delete(keys.activity, keys.sandboxed, keys.ended, *indexes)
            await redis.set("sci:schema", 1)
            store = RedisStore(server.url)
            await store.open()
            try:
                assert [r.key for r in await store.sessions_holding_sandboxes()] == ["T1:C1:2.0"]
                assert await store.prune(CUTOFF, CUTOFF) == EXPECTED
            finally:
                await store.close()
            assert await redis.get("sci:schema") == "2"
        finally:
            await redis.aclose()


async def test_a_session_hash_of_the_earlier_layout_reads_and_new_ones_suit_its_replicas(
    tmp_path: Path,
) -> None:
    """Sessions were written with the Slack thread's parts (team, channel, thread_ts) beside
    the key; a replica of that version reads those fields, so during a rolling deploy they
    are still written, empty, and a hash that has them still reads."""
    async with redis_server(tmp_path / "redis") as server:
        store = RedisStore(server.url)
        await store.open()
        redis = Redis.from_url(server.url, decode_responses=True)
        try:
            record = session()
            await store.save_session(record)
            written = await redis.hgetall(store.keys.session(record.key))
            assert {written[f] for f in ("team", "channel", "thread_ts")} == {'""'}
            earlier = {"team": '"T1"', "channel": '"C1"', "thread_ts": '"1.0"'}
            await redis.hset(store.keys.session(record.key), mapping=earlier)
            assert await store.get_session(record.key) == record
        finally:
            await redis.aclose()
            await store.close()
