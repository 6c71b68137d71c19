"""The engine on its own: a person's questions joined while a run goes, Stop by run id, Continue
allowances and budgets kept in the store, so another engine on the same store sees them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.compose import Runtime
from bot.run_events import RunFinished, ToolCallStarted
from bot.sessions.engine import Engine
from bot.sessions.events import (
    BudgetSpent,
    RunStarted,
    RunStopped,
    SandboxWaiting,
    SessionEvent,
)
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import Recorder, file_chunks, settings_for

KEY = "T1:C1:100.1"


class Views:
    """A view per run, as a front end gives them, all recorded."""

    def __init__(self) -> None:
        self.runs: list[Recorder] = []

    def __call__(self, key: str) -> Recorder:
        self.runs.append(Recorder())
        return self.runs[-1]

    def of(self, kind: type) -> list[Any]:
        return [e for r in self.runs for e in r.of(kind)]

    async def wait_for(self, kind: type, timeout: float = 10) -> SessionEvent:
        async with asyncio.timeout(timeout):
            while not self.of(kind):  # noqa: ASYNC110 - the events come from the engine
                await asyncio.sleep(0.01)
        return self.of(kind)[0]


@asynccontextmanager
async def engine_on(
    script: Callable, root: Path, **settings: Any
) -> AsyncIterator[tuple[Engine, Views, SqliteStore, FakeAnthropic]]:
    async with FakeAnthropic(script) as fake:
        runtime = Runtime.from_settings(settings_for(fake.base_url, root, **settings))
        store = SqliteStore(root / "engine.db")
        await store.open()
        views = Views()
        engine = runtime.engine(store, views, lambda source: file_chunks)
        try:
            yield engine, views, store, fake
        finally:
            await engine.shutdown(0)
            await engine.close(KEY)
            await runtime.close()
            await store.close()


async def test_questions_asked_during_a_run_are_joined_into_the_next(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 0.5"})])
        if req.tool_results():
            return Reply([text("slept")])
        return Reply([text("answered: " + req.messages[-1]["content"][-1]["text"])])

    async with engine_on(script, sandbox_root) as (engine, views, store, fake):
        first = await engine.ask(KEY, "one", user="U1")
        await views.wait_for(RunStarted)
        second = await engine.ask(KEY, "two", user="U2")
        third = await engine.ask(KEY, "three", user="U2")  # the same person's: joined
        results = await asyncio.gather(first, second, third)
        calls = await store.tool_calls(KEY)
    assert isinstance(results[0], RunFinished)
    assert results[1] is results[2] and isinstance(results[1], RunFinished)
    # The two waiting questions went to the model as one question, in one run.
    assert fake.requests[-1].messages[-1]["content"] == [{"type": "text", "text": "two\n\nthree"}]
    assert results[1].answer == "answered: two\n\nthree"
    assert [e.question for e in views.of(RunStarted)] == ["one", "two\n\nthree"]
    assert len(calls) == 1


async def test_stop_by_run_id_is_recorded_with_who_pressed_it(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 30"})])
        return Reply([text("should not get here")])

    async with engine_on(script, sandbox_root) as (engine, views, store, _):
        done = await engine.ask(KEY, "wait", user="U1")
        started = await views.wait_for(RunStarted)
        await asyncio.sleep(0.3)  # the command is running
        assert await engine.stop(started.run_id, "U9")
        assert await done is None
        run = await store.get_run(started.run_id)
        assert not await engine.stop(started.run_id, "U8")  # already ended
    assert run is not None and run.outcome == "stopped" and run.stopped_by == "U9"
    assert [e.by for e in views.of(RunStopped)] == ["U9"]


async def test_stop_ends_a_wait_on_a_detached_command_at_once(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0:
            code = {"language": "bash", "code": "sleep 1000", "detached": True}
            return Reply([tool_use("run_code", code)])
        if req.turn == 1:
            started = req.tool_results()[0].text.split("as ")[1].split(";")[0]
            return Reply([tool_use("check_command", {"command_id": started, "wait_s": 600})])
        return Reply([text("should not get here")])

    async with engine_on(script, sandbox_root) as (engine, views, _, fake):
        done = await engine.ask(KEY, "wait", user="U1")
        started = await views.wait_for(RunStarted)
        async with asyncio.timeout(10):
            while len(views.of(ToolCallStarted)) < 2:  # noqa: ASYNC110 - events from the engine
                await asyncio.sleep(0.01)
        assert await engine.stop(started.run_id, "U1")
        assert await asyncio.wait_for(done, 10) is None
    assert len(fake.requests) == 2  # the wait held the model back: no turn per poll


async def test_a_thread_over_max_sandboxes_is_told_it_waits_and_then_answered(
    sandbox_root: Path,
) -> None:
    """MAX_SANDBOXES=1: while the first thread's run goes, the second thread's run waits
    for its sandbox, says so, and once that run is over takes its place and answers."""

    def script(req):
        if req.tool_results():
            return Reply([text("counted")])
        gate = "until [ -e /buddy/work/go ]; do sleep 0.1; done"  # the test opens it
        code = gate if "first" in req.last_user_text else "echo 1"
        return Reply([tool_use("run_code", {"language": "bash", "code": code})])

    other = "T1:C1:100.2"
    async with engine_on(script, sandbox_root, max_sandboxes=1) as (engine, views, _, _fake):
        first = await engine.ask(KEY, "first", user="U1")
        await views.wait_for(ToolCallStarted, 30)
        # The call may start while its sandbox is still being made (it is asked for at
        # the question, and a busy host makes it slowly): the id is known once it is made.
        async with asyncio.timeout(30):
            while (sandbox_id := engine.sandbox_id(KEY)) is None:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        second = await engine.ask(other, "second", user="U2")
        waiting = await views.wait_for(SandboxWaiting, 30)
        assert sandbox_id is not None
        (sandbox_root / sandbox_id / "work" / "go").touch()
        assert isinstance(await asyncio.wait_for(first, 30), RunFinished)
        result = await asyncio.wait_for(second, 30)
        await engine.close(other)
    assert waiting == SandboxWaiting(1)
    assert isinstance(result, RunFinished) and result.answer == "counted"


async def test_budgets_and_continue_allowances_live_in_the_store(sandbox_root: Path) -> None:
    def script(req):
        return Reply([text("cheap answer")])

    limits = {"max_cost_usd_per_thread": 0.000001, "max_cost_usd_per_run": 1.0}
    async with engine_on(script, sandbox_root, **limits) as (engine, views, store, fake):
        assert isinstance(await (await engine.ask(KEY, "first", user="U1")), RunFinished)
        assert await (await engine.ask(KEY, "second", user="U1")) is None
        spent = views.of(BudgetSpent)[0]
        assert spent.scope == "thread" and spent.continue_usd == 1.0
        continued = await engine.continue_run(KEY, "U1", "run:r1")
        assert continued is not None and isinstance(await continued, RunFinished)
        assert await engine.continue_run(KEY, "U2", "run:r1") is None  # that button is used
        assert len(fake.requests) == 2
        session = await store.get_session(KEY)
    assert session is not None and session.granted_usd == 1.0
    # Another engine on the same store (a restart) counts the allowance too.
    async with engine_on(script, sandbox_root, **limits) as (engine, views, store, fake):
        assert isinstance(await (await engine.ask(KEY, "third", user="U1")), RunFinished)
