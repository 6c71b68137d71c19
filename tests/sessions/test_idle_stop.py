"""SESSION_IDLE_ACTION=stop: a quiet thread's sandbox is stopped and kept for
SESSION_RETAIN_S, started again if the thread speaks, then deleted; the orphan sweeper
spares it while it is kept and takes it once its time is over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.compose import Runtime
from bot.run_events import RunFinished
from bot.sessions.engine import Engine
from bot.sessions.events import SandboxSuspended
from bot.sessions.sandbox_changes import STOPPED
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.support import Recorder, file_chunks, runtime_on

KEY = "T1:C1:200.1"
IDLE_S = 0.4
RETAIN_S = 1.2
MARK = "import os; print(os.path.exists('/buddy/work/mark')); open('/buddy/work/mark', 'w')"


def marking(req: ModelRequest) -> Reply:
    """Says whether the marker was there, and leaves it."""
    results = req.tool_results()
    if results:
        return Reply([text(results[-1].text.split("--- stdout ---\n")[1].split("\n")[0])])
    return Reply([tool_use("run_code", {"language": "python", "code": MARK})])


@asynccontextmanager
async def engine_on(
    backend: str, root: Path
) -> AsyncIterator[tuple[Engine, Runtime, Recorder, FakeAnthropic]]:
    settings = {
        "session_idle_action": "stop",
        "session_idle_timeout": IDLE_S,
        "session_retain_s": RETAIN_S,
        "orphan_min_age_s": 0,
    }
    told = Recorder()
    async with (
        FakeAnthropic(marking) as model,
        runtime_on(backend, model.base_url, root, **settings) as runtime,
    ):
        store = SqliteStore(root / "idle.db")
        await store.open()
        engine = runtime.engine(store, lambda key: told, lambda source: file_chunks)
        try:
            yield engine, runtime, told, model
        finally:
            await engine.shutdown(0)
            await engine.close(KEY)
            await store.close()


async def answer(engine: Engine, question: str) -> str:
    result = await (await engine.ask(KEY, question, user="U1"))
    assert isinstance(result, RunFinished)
    return result.answer


async def kept(runtime: Runtime) -> list[str]:
    return [info.id for info in await runtime.provider.list_tagged(runtime.settings.sandbox_tag)]


async def test_a_quiet_sandbox_is_stopped_kept_resumed_then_deleted(
    backend: str, sandbox_root: Path
) -> None:
    async with engine_on(backend, sandbox_root) as (engine, runtime, told, model):
        assert await answer(engine, "first") == "False"
        sandbox_id = engine.sandbox_id(KEY)
        await asyncio.sleep(IDLE_S)
        assert await engine.reap() == [KEY]  # stopped, not deleted
        assert told.of(SandboxSuspended) == [SandboxSuspended(RETAIN_S)]
        assert await engine.reap() == []  # stopped once
        assert await kept(runtime) == [sandbox_id]

        assert await answer(engine, "second") == "True"  # the same disk
        assert engine.sandbox_id(KEY) == sandbox_id
        assert STOPPED in model.requests[-2].last_user_text

        await asyncio.sleep(IDLE_S)
        assert await engine.reap() == [KEY]  # quiet again: stopped again
        await asyncio.sleep(RETAIN_S)
        assert await engine.reap() == [KEY]  # kept long enough: deleted
        assert await kept(runtime) == []
        assert len(told.of(SandboxSuspended)) == 2  # nothing more said on the deletion
        assert await answer(engine, "third") == "False"  # a fresh sandbox


async def test_the_sweeper_spares_a_kept_sandbox_until_its_time_is_over(
    backend: str, sandbox_root: Path
) -> None:
    async with engine_on(backend, sandbox_root) as (engine, runtime, _, _):
        await answer(engine, "first")
        sandbox_id = engine.sandbox_id(KEY)
        sweeper = runtime.orphan_sweeper(engine)
        await asyncio.sleep(IDLE_S)
        assert await engine.reap() == [KEY]
        assert await sweeper.sweep() == []  # kept: a session still holds it
        assert await kept(runtime) == [sandbox_id]
        await asyncio.sleep(RETAIN_S)
        # No reaper ran (this process was busy, or down): the sweeper deletes it.
        assert await sweeper.sweep() == [sandbox_id]
        assert await kept(runtime) == []
        # The thread, still open here, goes on in a fresh sandbox.
        assert await answer(engine, "again") == "False"
        assert engine.sandbox_id(KEY) not in (None, sandbox_id)
