"""Fenced leases: a run whose write is refused (its thread was taken over) stops without a
word; across real replicas, one frozen (SIGSTOP) past its lease mid-run and thawed after
another replica took its thread over writes nothing more for the thread and posts nothing,
and the thread is answered by its new owner, once per question.
The store's own refusals are in tests/store/test_store.py, on both backends."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from bot.compose import Runtime
from bot.run_events import RunFailed, RunFinished, ToolCallStarted
from bot.sessions.events import RunStarted
from bot.store.redis_keys import Keys
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore
from tests.coord.test_replicas import RETRIED, ask, mention, steps
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.replicas import Replicas, answers, replicas, script
from tests.sessions.test_engine import KEY, engine_on
from tests.slack_harness import CHANNEL
from tests.support import Recorder, file_chunks, settings_for

LEASE_S = 6  # short, so the frozen replica's lease lapses soon; renewed every 2 s, so the
# other keeps its own through a 4 s stall of a busy machine
STOPPED_HERE = "taken over by another replica; stopping here"


async def test_a_run_whose_write_is_refused_stops_quietly_and_lets_go(
    sandbox_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 1"})])
        return Reply([text("should not get here")])

    async with engine_on(script, sandbox_root) as (engine, views, store, fake):
        await engine.adopt(KEY)  # as a replica does when it takes a thread: its first token
        done = await engine.ask(KEY, "wait", user="U1")
        started = await views.wait_for(RunStarted)
        await views.wait_for(ToolCallStarted)
        elsewhere = SqliteStore(store.path)  # another owner takes the thread over meanwhile
        await elsewhere.open()
        await elsewhere.fence(KEY)
        await elsewhere.close()
        assert await done is None
        in_memory = engine.threads_in_memory
        run = await store.get_run(started.run_id)
        calls = await store.tool_calls(KEY)

    assert views.of(RunFinished) == [] and views.of(RunFailed) == []  # nothing told
    assert len(fake.requests) == 1  # no model turn after the refusal
    assert in_memory == 0  # the stale copy is dropped
    assert run is not None and run.outcome is None  # its end is the new owner's to write
    assert calls == []  # the refused write: the tool call's record
    refused = [r for r in caplog.records if STOPPED_HERE in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.WARNING


async def test_the_reaper_leaves_the_sandbox_of_a_thread_taken_over(sandbox_root: Path) -> None:
    async with FakeAnthropic(lambda req: Reply([text("hi")])) as fake:
        settings = settings_for(fake.base_url, sandbox_root, session_idle_timeout=0.05)
        runtime = Runtime.from_settings(settings)
        store = SqliteStore(sandbox_root / "reap.db")
        await store.open()
        engine = runtime.engine(store, lambda key: Recorder(), lambda source: file_chunks)
        try:
            await engine.adopt(KEY)
            assert isinstance(await (await engine.ask(KEY, "hello", user="U1")), RunFinished)

            # The answer comes before the run's end is written, and a run with no tool call
            # may end before its sandbox is up: the takeover comes after both (else a write
            # of this copy's is refused and it leaves memory before the reaper can show
            # what it does with a stale copy)
            async def settled() -> bool:
                record = await store.get_session(KEY)
                return not await store.runs_in_flight() and bool(record and record.sandbox_id)

            for _ in range(3000):
                if await settled():
                    break
                await asyncio.sleep(0.02)
            sandbox_id = engine.sandbox_id(KEY)
            assert sandbox_id is not None
            elsewhere = SqliteStore(store.path)
            await elsewhere.open()
            await elsewhere.fence(KEY)  # another owner took the thread and uses its sandbox
            await elsewhere.close()
            reaped: list[str] = []
            async with asyncio.timeout(20):
                while engine.threads_in_memory:  # once quiet past the idle timeout
                    reaped += await engine.reap()
                    await asyncio.sleep(0.02)
            record = await store.get_session(KEY)
            sandbox = await runtime.provider.attach(sandbox_id)
        finally:
            await engine.shutdown(0)
            await runtime.close()
            await store.close()

    assert reaped == []  # the stale copy left memory without reaping anything
    assert sandbox is not None  # the new owner's sandbox still runs
    assert record is not None and record.state == "active" and record.sandbox_id == sandbox_id


async def written(r: Replicas, key: str) -> dict[str, Any]:
    """All the store holds for the thread, and its runs, as raw Redis values."""
    keys = Keys()
    redis = Redis.from_url(r.redis.url, decode_responses=True)
    store = RedisStore(r.redis.url)
    await store.open()
    try:
        runs = [await redis.hgetall(k) async for k in redis.scan_iter(keys.run("*"))]
        return {
            "session": await redis.hgetall(keys.session(key)),
            "history": await store.load_history(key),
            "files": await redis.lrange(keys.files(key), 0, -1),
            "turns": await redis.lrange(keys.turns(key), 0, -1),
            "tool_calls": await redis.lrange(keys.tool_calls(key), 0, -1),
            "runs": sorted(runs, key=lambda run: run["run_id"]),
            "in_flight": await redis.zrange(keys.in_flight, 0, -1),
        }
    finally:
        await store.close()
        await redis.aclose()


async def test_a_replica_paused_past_its_lease_writes_nothing_after_the_take_over(
    sandbox_root: Path, monkeypatch
) -> None:
    async with replicas(script, sandbox_root, monkeypatch, replica_lease_s=LEASE_S) as r:
        thread, owner = await mention(r, "note before")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 30)
        key = await only_session_key(r)
        await r.h.slack.post_user_message(CHANNEL, "slow", thread_ts=thread, connection=owner)
        await r.h.slack.wait_for(lambda: steps(r, thread) >= 2, 30)  # the 4 s step runs
        r.pause(owner)
        await r.h.wait_for_text(thread, RETRIED, timeout=45)  # the survivor's take-over
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 2, 60)  # asked again
        survivor = 1 - owner
        await ask(r, thread, "read", to=survivor)
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 3, 60)
        await r.idle()  # the new owner's run ended
        before = await written(r, key)
        r.resume(owner)
        # Its step ends, and with fencing its next write is refused; without, it answers.
        await r.h.slack.wait_for(
            lambda: STOPPED_HERE in r.log(owner) or len(answers(r, thread)) > 3, 60
        )
        after = await written(r, key)
        await ask(r, thread, "hello", to=owner)  # passed on to the new owner
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 4, 60)
        stale_log, new_log = r.log(owner), r.log(survivor)

    assert after == before  # nothing of the thawed replica landed
    said = answers(r, thread)
    assert "slept" in said[1]  # the cut question, answered by the new owner
    assert "note before" in said[2]  # the take-over's answer, in the same sandbox
    assert said[3].endswith("to: hello") and len(said) == 4  # no answer from the stale run
    assert stale_log.count(STOPPED_HERE) == 1
    assert STOPPED_HERE not in new_log
    assert "Traceback" not in stale_log
    texts = r.h.texts(thread)
    assert texts.count(":warning:") == 1 and RETRIED in texts  # told once, by the new owner


async def only_session_key(r: Replicas) -> str:
    store = RedisStore(r.redis.url)
    await store.open()
    try:
        (record,) = await store.list_sessions()
        return record.key
    finally:
        await store.close()
