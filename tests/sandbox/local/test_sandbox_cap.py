"""MAX_SANDBOXES: a thread over the cap takes the sandbox of the least recently used thread
with no run going (stopped or deleted as the idle teardown would, its thread resuming on
its next message); only while every sandbox has a run going does it wait, then get told
why it cannot have one. And a slot the provider took for a sandbox that never came to be
is free again."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.compose import Runtime
from bot.run_events import RunFailed, RunFinished, ToolCallStarted
from bot.sandbox.base import SandboxSpec
from bot.sessions.engine import Engine
from bot.sessions.events import SandboxSuspended, SandboxWaiting
from bot.slack.render.wording import ROOM_DELETED
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.sandbox.local.test_sandbox_isolation import eventually
from tests.slack_harness import CHANNEL, running_bot
from tests.support import Recorder, local_provider_at, settings_for

A, B, C, D = (f"T1:C1:500.{n}" for n in range(1, 5))
CSV = b"year,value\n2000,1\n2010,2\n"
# The file's lines, and whether an earlier question of the thread left its mark here.
COUNT = (
    "import os; print(sum(1 for _ in open('/buddy/work/uploads/data.csv')), "
    "os.path.exists('/buddy/work/mark')); open('/buddy/work/mark', 'w')"
)
HOLD = "sleep 120"
HELLO = "hello-from-the-sandbox"  # a run that goes on until stopped


def script(req: ModelRequest) -> Reply:
    results = req.tool_results()
    if results:
        return Reply([text(results[-1].text.split("--- stdout ---\n")[1].split("\n")[0])])
    if "hold" in req.last_user_text:
        return Reply([tool_use("run_code", {"language": "bash", "code": HOLD})])
    if "hello" in req.last_user_text:  # a thread with no file
        return Reply([tool_use("run_code", {"language": "python", "code": f"print({HELLO!r})"})])
    return Reply([tool_use("run_code", {"language": "python", "code": COUNT})])


async def chunks() -> AsyncIterator[bytes]:
    yield CSV


class Views:
    """Every event each thread was told, whichever run or teardown told it."""

    def __init__(self) -> None:
        self.told: dict[str, Recorder] = {}

    def __call__(self, key: str) -> Recorder:
        return self.told.setdefault(key, Recorder())

    def of(self, key: str, kind: type) -> list[Any]:
        return self.told[key].of(kind) if key in self.told else []


@asynccontextmanager
async def engine_on(
    root: Path, **settings: Any
) -> AsyncIterator[tuple[Engine, Views, FakeAnthropic]]:
    async with FakeAnthropic(script) as fake:
        options = {"max_sandboxes": 2, "sandbox_wait_s": 1.5, "tool_timeout_s": 150}
        runtime = Runtime.from_settings(settings_for(fake.base_url, root, **(options | settings)))
        store = SqliteStore(root / "cap.db")
        await store.open()
        views = Views()
        engine = runtime.engine(store, views, lambda source: chunks)
        try:
            yield engine, views, fake
        finally:
            await engine.shutdown(0)
            for key in (A, B, C, D):
                await engine.close(key)
            await runtime.close()
            await store.close()


async def answer(engine: Engine, key: str, question: str = "count") -> str:
    result = await asyncio.wait_for(await engine.ask(key, question, user="U1"), 60)
    assert isinstance(result, RunFinished), result
    return result.answer


async def with_file(engine: Engine, key: str) -> str:
    await engine.add_file(key, "data.csv", chunks, {"id": f"F-{key}"})
    return await answer(engine, key)


def exists(root: Path, sandbox_id: str | None) -> bool:
    return sandbox_id is not None and (root / sandbox_id).is_dir()


async def test_a_thread_over_the_cap_takes_the_least_recently_used_sandbox(
    sandbox_root: Path,
) -> None:
    async with engine_on(sandbox_root) as (engine, views, _):
        assert await with_file(engine, A) == "3 False"
        first = engine.sandbox_id(A)
        assert await with_file(engine, B) == "3 False"
        assert await with_file(engine, C) == "3 False"  # at once, not after a wait
        assert views.of(C, SandboxWaiting) == []
        assert not exists(sandbox_root, first)  # A's went: it was used longest ago
        assert views.of(A, SandboxSuspended) == [SandboxSuspended(for_room=True)]
        assert engine.threads_in_memory == 2  # A left memory, as after an idle teardown

        second = engine.sandbox_id(B)
        assert await answer(engine, A) == "3 False"  # its file again, in a fresh sandbox
        assert engine.sandbox_id(A) not in (None, first)
        assert not exists(sandbox_root, second)  # now B's went
        assert views.of(B, SandboxSuspended) == [SandboxSuspended(for_room=True)]
        assert exists(sandbox_root, engine.sandbox_id(C))
        assert len(list(sandbox_root.glob("lcl-*"))) == 2


async def test_with_idle_action_stop_the_sandbox_is_stopped_and_kept(
    sandbox_root: Path,
) -> None:
    settings = {"max_sandboxes": 1, "session_idle_action": "stop", "session_retain_s": 600}
    async with engine_on(sandbox_root, **settings) as (engine, views, _):
        assert await with_file(engine, A) == "3 False"
        first = engine.sandbox_id(A)
        assert await with_file(engine, B) == "3 False"
        assert exists(sandbox_root, first)  # stopped, files and all
        assert views.of(A, SandboxSuspended) == [SandboxSuspended(600, for_room=True)]
        assert await answer(engine, A) == "3 True"  # the same sandbox, started again
        assert engine.sandbox_id(A) == first
        # B's made room for A in turn
        assert views.of(B, SandboxSuspended) == [SandboxSuspended(600, for_room=True)]


async def test_two_threads_at_once_take_two_sandboxes_not_one_twice(sandbox_root: Path) -> None:
    async with engine_on(sandbox_root) as (engine, views, _):
        await with_file(engine, A)
        await with_file(engine, B)
        answers = await asyncio.gather(answer(engine, C, "hello"), answer(engine, D, "hello"))
        assert answers == [HELLO, HELLO]
        assert views.of(A, SandboxSuspended) == [SandboxSuspended(for_room=True)]
        assert views.of(B, SandboxSuspended) == [SandboxSuspended(for_room=True)]
        assert views.of(C, SandboxWaiting) == views.of(D, SandboxWaiting) == []
        assert len(list(sandbox_root.glob("lcl-*"))) == 2


async def test_a_thread_whose_run_is_starting_keeps_its_sandbox(sandbox_root: Path) -> None:
    async with engine_on(sandbox_root) as (engine, views, _):
        await with_file(engine, A)
        await with_file(engine, B)
        first = engine.sandbox_id(A)
        # A speaks again as C arrives: A was used longest ago, but its run is starting.
        again, _ = await asyncio.gather(answer(engine, A), answer(engine, C, "hello"))
        assert again == "3 True" and engine.sandbox_id(A) == first
        assert views.of(A, SandboxSuspended) == []
        assert views.of(B, SandboxSuspended) == [SandboxSuspended(for_room=True)]


async def test_while_every_sandbox_runs_a_third_waits_then_is_refused(sandbox_root: Path) -> None:
    async with engine_on(sandbox_root) as (engine, views, _):
        held = [await engine.ask(key, "hold", user="U1") for key in (A, B)]
        assert await eventually(lambda: all(views.of(k, ToolCallStarted) for k in (A, B)), 30)
        ids = [engine.sandbox_id(A), engine.sandbox_id(B)]
        result = await asyncio.wait_for(await engine.ask(C, "count", user="U2"), 60)
        assert set(views.of(C, SandboxWaiting)) == {SandboxWaiting(2)}
        assert isinstance(result, RunFailed)
        assert "all 2 sandboxes this bot may run at once are in use" in result.reason
        assert all(exists(sandbox_root, i) for i in ids)  # running: not taken
        assert views.of(A, SandboxSuspended) == views.of(B, SandboxSuspended) == []
        for key in (A, B):
            run_id = engine.running(key)
            assert run_id is not None and await engine.stop(run_id, "U1")
        await asyncio.gather(*held)


async def test_a_question_during_the_teardown_waits_for_it_and_resumes(
    sandbox_root: Path,
) -> None:
    async with engine_on(sandbox_root) as (engine, _, model):
        await with_file(engine, A)
        session, first = await engine.open(A), engine.sandbox_id(A)
        teardown = asyncio.create_task(session.suspend())
        asked = asyncio.create_task(session.ask("count", Recorder()))
        await teardown
        result = await asyncio.wait_for(asked, 60)
        assert isinstance(result, RunFinished) and result.answer == "3 False"
        assert not exists(sandbox_root, first)
        assert exists(sandbox_root, session.sandbox_id)
        # It ran in the fresh sandbox from its start, and the model was told so at once.
        assert "this is a fresh one" in model.requests[-2].last_user_text


async def test_a_file_on_its_way_in_keeps_its_sandbox(sandbox_root: Path) -> None:
    """A thread taking a file in has no run going, yet its sandbox is in use: a thread
    over the cap waits for the file to be in, then takes that sandbox's place."""
    rows, last = b"year,value\n" + b"2000,1\n" * 10_000, b"2010,2\n"  # more than a peek
    arrived = asyncio.Event()

    async def slow() -> AsyncIterator[bytes]:
        yield rows
        await arrived.wait()
        yield last

    async with engine_on(sandbox_root, max_sandboxes=1, sandbox_wait_s=60) as (engine, views, _):
        assert await answer(engine, A, "hello") == HELLO
        adding = asyncio.create_task(engine.add_file(A, "data.csv", slow, {"id": "F-A"}))
        asked = asyncio.create_task(answer(engine, B, "hello"))
        waiting = lambda: views.of(B, SandboxWaiting) or asked.done()  # noqa: E731
        assert await eventually(waiting, 30)
        arrived.set()
        taken = await asyncio.wait_for(adding, 60)
        assert taken.size == len(rows) + len(last)  # all of it, not cut off by a teardown
        assert await asyncio.wait_for(asked, 60) == HELLO
        assert views.of(A, SandboxSuspended) == [SandboxSuspended(for_room=True)]


# -- the provider's slots --


async def test_an_attach_cut_off_in_its_cgroup_gives_its_slot_back(sandbox_root: Path) -> None:
    """An attach cancelled while it makes the sandbox's memory cgroup (here: a cgroup file
    that blocks, as a FIFO with no reader) made no sandbox: it holds no slot after."""
    if os.geteuid() != 0:
        pytest.skip("memory cgroups are made only when the bot runs as root")
    made = await (first := local_provider_at(sandbox_root)).create(SandboxSpec(session_key="x"))
    await first.close()
    cgroups = sandbox_root / "cgroups"
    (cgroups / f"sandbox-{made.id}").mkdir(parents=True)
    fifo = cgroups / f"sandbox-{made.id}" / "memory.limit_in_bytes"
    os.mkfifo(fifo)
    provider = local_provider_at(sandbox_root, max_sandboxes=1, wait_s=0, memory_cgroups=cgroups)
    attaching = asyncio.create_task(provider.attach(made.id))
    try:
        assert await eventually(lambda: provider.slots.taken == 1, 30)
        attaching.cancel()
        with pytest.raises(asyncio.CancelledError):
            await attaching
        assert provider.slots.taken == 0
        again = await provider.create(SandboxSpec(session_key="y"))  # the one slot is free
        await again.destroy()
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the cgroup step end
        os.close(reader)
        await provider.close()
        await made.destroy()


# -- what a Slack thread sees --


async def test_in_slack_the_thread_whose_sandbox_made_room_is_told_and_resumes(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_bot("local", script, sandbox_root, monkeypatch, max_sandboxes=1) as h:
        first = (await h.slack.post_user_message(CHANNEL, "hello", mention=True))["ts"]
        await h.wait_for_runs(first, 1, timeout=60)  # over: its sandbox is free to go
        second = (await h.slack.post_user_message(CHANNEL, "hello", mention=True))["ts"]
        await h.wait_for_text(second, HELLO, 60)
        await h.wait_for_text(first, ROOM_DELETED, 30)
        assert ":warning:" not in h.texts(second)
        assert await eventually(lambda: h.sandboxes_alive() == 1, 30)  # its folder goes too
        await h.slack.post_user_message(CHANNEL, "hello again", thread_ts=first)
        await h.slack.wait_for(lambda: h.texts(first).count(HELLO) >= 2, 60)
        await h.wait_for_text(second, ROOM_DELETED, 30)  # its turn to make room
