"""The engine with questions waiting: several people's questions run one after another, each
charged to its asker; the writes around a run (a question queued, a Continue allowance, the
figures an answer was traced to) are refused once the thread was taken over, and change
nothing; a stop before the run starts cancels it; a run its replica was cut off from is
asked again by the replica taking the thread over."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bot.run_events import RunFinished
from bot.sessions.events import RunInterrupted, RunStarted, RunStopped
from bot.sessions.run import RecordingView
from bot.store.base import Fenced
from bot.store.sqlite import SqliteStore
from bot.trace.figures import Figure, Trace
from bot.usage import Usage
from tests.fakes.anthropic import Reply, text, tool_use
from tests.sessions.test_engine import KEY, engine_on
from tests.store.test_store import session
from tests.support import Recorder


def sleep_first(req):
    """The first question's run sleeps half a second (others queue meanwhile); every other
    question is answered at once, naming what it was asked."""
    if req.turn == 0 and "one" in str(req.messages[-1]["content"]):
        return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 0.5"})])
    if req.tool_results():
        return Reply([text("slept")])
    return Reply([text("answered: " + req.messages[-1]["content"][-1]["text"])])


async def take_over(store: SqliteStore) -> None:
    """Another replica takes the thread over: a newer fencing token."""
    elsewhere = SqliteStore(store.path)
    await elsewhere.open()
    await elsewhere.fence(KEY)
    await elsewhere.close()


async def test_questions_from_several_people_run_one_after_another_each_charged_to_its_asker(
    sandbox_root: Path,
) -> None:
    async with engine_on(sleep_first, sandbox_root) as (engine, views, store, _):
        first = await engine.ask(KEY, "one", user="U1")
        await views.wait_for(RunStarted)
        waiting = [
            await engine.ask(KEY, "two", user="U2"),
            await engine.ask(KEY, "three", user="U3"),
            await engine.ask(KEY, "four", user="U3"),  # the same asker's: joined
        ]
        results = await asyncio.gather(first, *waiting)
        spent = {user: await store.spent(user=user) for user in ("U1", "U2", "U3")}
        runs = [(r.question, r.user) for r in await store.runs(KEY)]

    assert all(isinstance(r, RunFinished) for r in results)
    assert runs == [("one", "U1"), ("two", "U2"), ("three\n\nfour", "U3")]
    assert results[1].answer == "answered: two"  # type: ignore[union-attr]
    assert results[2] is results[3]
    for user, result in zip(("U1", "U2", "U3"), results, strict=False):
        assert result.cost_usd and spent[user] == pytest.approx(result.cost_usd)  # type: ignore[union-attr]


async def test_a_question_to_a_thread_taken_over_is_refused_and_left_unqueued(
    sandbox_root: Path,
) -> None:
    async with engine_on(sleep_first, sandbox_root) as (engine, _, store, fake):
        await engine.adopt(KEY)
        assert isinstance(await (await engine.ask(KEY, "hello", user="U1")), RunFinished)
        await take_over(store)
        asked = len(fake.requests)
        with pytest.raises(Fenced):
            await engine.ask(KEY, "late", user="U2")
        in_memory = engine.threads_in_memory
        left = await store.take_queued(KEY)
    assert left == []  # nothing waits for the new owner's next run to pick up unasked
    assert in_memory == 0  # the stale copy is dropped
    assert len(fake.requests) == asked


async def test_a_continue_on_a_thread_taken_over_grants_nothing(sandbox_root: Path) -> None:
    async with engine_on(sleep_first, sandbox_root) as (engine, _, store, fake):
        await engine.adopt(KEY)
        assert isinstance(await (await engine.ask(KEY, "hello", user="U1")), RunFinished)
        await take_over(store)
        asked = len(fake.requests)
        with pytest.raises(Fenced):
            await engine.continue_run(KEY, "U1", "run:r1")
        session = await store.get_session(KEY)
        # The button is still unused: the new owner may grant it.
        granted_there = await store.grant_once(KEY, "run:r1", 1.0)
    assert session is not None and session.granted_usd == 0.0
    assert granted_there and len(fake.requests) == asked


async def test_the_figures_of_a_run_taken_over_are_refused(sandbox_root: Path) -> None:
    store = SqliteStore(sandbox_root / "figures.db")
    await store.open()
    try:
        await store.save_session(session(KEY))
        stale = await store.fence(KEY)
        await store.start_run(KEY, "run-1", "q", 1.0, "U1", token=stale)
        await store.fence(KEY)  # taken over
        view = Recorder()
        recording = RecordingView(store, KEY, "run-1", view, stale)
        figure = Figure("42", 42.0, 0, False, 0, 2)
        done = RunFinished("42", 1, Usage(), 0.01, "end_turn", figures=(Trace(figure, 1, "42"),))
        with pytest.raises(Fenced):
            await recording(done)
        run = await store.get_run("run-1")
    finally:
        await store.close()
    assert run is not None and run.figures == ()
    assert view.of(RunFinished) == []  # the answer is not shown by the stale replica


async def mine(asker: str) -> bool:
    return asker == "U1"


async def test_a_stop_before_the_run_starts_cancels_it(sandbox_root: Path) -> None:
    """A stop that comes while the question is on its way (taken from the queue, its run not
    yet started) cancels it: the thread is told, and nothing reaches the model."""
    async with engine_on(sleep_first, sandbox_root) as (engine, views, store, fake):
        await engine.open(KEY)
        done = await engine.ask(KEY, "hello", user="U1")
        assert engine.running(KEY) is None  # the worker has the question; no run yet
        assert engine.stop_waiting(KEY, "U1", mine)
        result = await done
        runs = await store.runs(KEY)
        queued = await store.take_queued(KEY)
    assert result is None and runs == [] and queued == []
    assert [e.by for e in views.of(RunStopped)] == ["U1"]
    assert views.of(RunStarted) == [] and fake.requests == []


async def cut_elsewhere(store: SqliteStore, question: str, run_id: str, **run: object) -> None:
    """Another replica began a run of the thread and died (or stalled past its lease)."""
    elsewhere = SqliteStore(store.path)
    await elsewhere.open()
    try:
        if await elsewhere.get_session(KEY) is None:
            await elsewhere.save_session(session(KEY, sandbox_id=None))
        token = await elsewhere.fence(KEY)
        await elsewhere.start_run(KEY, run_id, question, time.time(), "U7", token=token)
        if run.get("stopped_by"):
            await elsewhere.request_stop(run_id, str(run["stopped_by"]))
    finally:
        await elsewhere.close()


async def test_a_run_cut_by_its_replica_is_asked_again_by_the_one_taking_over(
    sandbox_root: Path,
) -> None:
    async with engine_on(sleep_first, sandbox_root) as (engine, views, store, _):
        await cut_elsewhere(store, "how many rows?", "cut-1")
        assert await engine.adopt(KEY)  # a run goes here now: the lease is kept
        async with asyncio.timeout(30):
            while not [r for r in await store.runs(KEY) if r.outcome == "finished"]:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        cut = await store.get_run("cut-1")
        runs = [(r.question, r.user, r.outcome) for r in await store.runs(KEY)]
    assert cut is not None and cut.outcome == "interrupted"
    assert runs == [("how many rows?", "U7", "finished")]
    assert [e.why for e in views.of(RunInterrupted)] == ["retried"]
    assert views.of(RunFinished)[0].answer == "answered: how many rows?"


async def test_a_cut_run_is_asked_again_once_and_not_when_stopped(sandbox_root: Path) -> None:
    async with engine_on(sleep_first, sandbox_root) as (engine, views, store, _):
        await cut_elsewhere(store, "stop me", "cut-1", stopped_by="U7")
        assert not await engine.adopt(KEY)  # someone pressed Stop: not asked again
        await cut_elsewhere(store, "kills replicas", "cut-2")
        await store.add_turn(KEY, "cut-2", {"input_tokens": 1}, 0.0, time.time())
        await store.end_run("cut-2", "interrupted", time.time())  # cut once already
        await cut_elsewhere(store, "kills replicas", "cut-3")
        assert not await engine.adopt(KEY)  # a question that kills its replica: once only
        runs = await store.runs(KEY)
    assert [e.why for e in views.of(RunInterrupted)] == ["restart", "restart"]
    assert views.of(RunStarted) == [] and [r.run_id for r in runs] == ["cut-2"]
