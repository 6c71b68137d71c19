"""An idle thread leaves the process's memory once reaped, and its next question is
answered from the store: the whole conversation and its files, in a fresh sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.compose import Runtime
from bot.run_events import RunFinished
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import Recorder, settings_for

KEY = "T1:C1:400.1"
CSV = b"year,value\n2000,1\n2010,2\n"


def script(req: Any) -> Reply:
    """Counts the uploaded file's lines for each question (in this run's sandbox)."""
    last = req.messages[-1]["content"]
    if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
        code = "print(sum(1 for _ in open('/buddy/work/uploads/data.csv')))"
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    return Reply([text("lines=" + req.tool_results()[-1].text.split("--- stdout ---\n")[1][:1])])


async def chunks() -> Any:
    yield CSV


async def test_an_idle_thread_is_dropped_and_resumes_from_the_store(sandbox_root: Path) -> None:
    async with FakeAnthropic(script) as fake:
        settings = settings_for(fake.base_url, sandbox_root, session_idle_timeout=0.05)
        runtime = Runtime.from_settings(settings)
        store = SqliteStore(sandbox_root / "idle.db")
        await store.open()
        views: list[Recorder] = []

        def view_for(key: str) -> Recorder:
            views.append(Recorder())
            return views[-1]

        engine = runtime.engine(store, view_for, lambda source: chunks)
        try:
            await engine.add_file(KEY, "data.csv", chunks, {"id": "F1"})
            first = await (await engine.ask(KEY, "how many lines?", user="U1"))
            sandbox_id = engine.sandbox_id(KEY)
            assert engine.threads_in_memory == 1 and sandbox_id is not None

            async with asyncio.timeout(20):
                while KEY not in await engine.reap():  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            assert engine.threads_in_memory == 0
            assert await engine.file_count(KEY) == 1  # counted from the store
            assert await runtime.provider.attach(sandbox_id) is None

            second = await (await engine.ask(KEY, "and now?", user="U1"))
            history = fake.requests[-1].messages
            fresh = engine.sandbox_id(KEY)
        finally:
            await engine.shutdown(0)
            await engine.close(KEY)
            await runtime.close()
            await store.close()
    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert "how many lines?" in str(history[0]["content"])  # the first question, from the store
    assert second.answer == "lines=3"  # the file, fetched into the fresh sandbox
    assert fresh not in (None, sandbox_id)
