"""The kernel through whole runs: state between the questions of a thread, Stop during a
long cell, and a chart from plt.show() posted to the thread."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.run_events import RunFinished, ToolCallStarted
from bot.sessions.engine import Engine
from bot.sessions.events import RunStarted
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.sessions.test_engine import KEY, Views
from tests.sessions.test_restarts import last_question
from tests.slack_harness import CHANNEL, running_bot
from tests.support import file_chunks, matplotlib_in_sandbox, runtime_on

CELLS = {
    "load": "rows = list(range(10))\nprint('loaded', len(rows))",
    "use": "print('sum', sum(rows))",
    "slow": "x = 42\nimport time\ntime.sleep(60)",
    "after": "print('x is', x)",
    "chart": "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()",
}


def script(req: ModelRequest) -> Reply:
    """Each question is the name of a cell to run; the answer quotes the tool result. (After
    a Stop, the cancelled call's result comes with the next question.)"""
    asked = any(block.get("type") == "text" for block in req.last_user_blocks)
    if not asked:
        return Reply([text("result: " + req.tool_results()[-1].text)])
    code = CELLS[last_question(req)]
    return Reply([tool_use("run_code", {"language": "python", "code": code})])


@asynccontextmanager
async def engine_for(backend: str, root: Path) -> AsyncIterator[tuple[Engine, Views]]:
    async with FakeAnthropic(script) as model, runtime_on(backend, model.base_url, root) as rt:
        store = SqliteStore(root / "kernel.db")
        await store.open()
        views = Views()
        engine = rt.engine(store, views, lambda source: file_chunks)
        try:
            yield engine, views
        finally:
            await engine.shutdown(0)
            await engine.close(KEY)
            await store.close()


async def answer(engine: Engine, question: str) -> str:
    result = await (await engine.ask(KEY, question, user="U1"))
    assert isinstance(result, RunFinished), result
    return result.answer


async def test_state_survives_between_questions_in_a_thread(
    backend: str, sandbox_root: Path
) -> None:
    async with engine_for(backend, sandbox_root) as (engine, _):
        first = await answer(engine, "load")
        second = await answer(engine, "use")
    assert "loaded 10" in first
    assert "sum 45" in second and "fresh Python kernel" not in second


async def test_stop_during_a_long_cell_interrupts_it_and_keeps_state(
    backend: str, sandbox_root: Path
) -> None:
    async with engine_for(backend, sandbox_root) as (engine, views):
        done = await engine.ask(KEY, "slow", user="U1")
        started = await views.wait_for(RunStarted)
        await views.wait_for(ToolCallStarted)
        await asyncio.sleep(1.5)  # the cell is sleeping
        stopped_at = time.monotonic()
        assert await engine.stop(started.run_id, "U9")
        assert await done is None
        took = time.monotonic() - stopped_at
        after = await answer(engine, "after")
    assert took < 5  # the cell was interrupted, not waited out
    assert "x is 42" in after and "fresh Python kernel" not in after


async def test_a_chart_from_plt_show_is_posted_to_the_thread(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not matplotlib_in_sandbox():
        pytest.skip("matplotlib is not installed for the sandbox's python3")
    async with running_bot("local", script, sandbox_root, monkeypatch) as h:
        message = await h.slack.post_user_message(CHANNEL, "chart", mention=True)
        await h.slack.wait_for(
            lambda: any(u.filename == "figure-1.png" for u in h.slack.uploads.values()), 20
        )
        chart = next(u for u in h.slack.uploads.values() if u.filename == "figure-1.png")
        await h.wait_for_text(message["ts"], "figure saved to /buddy/work/out/figure-1.png")
    assert chart.content.startswith(b"\x89PNG") and chart.thread_ts == message["ts"]
    # shown inline, described by the chart the kernel recorded (a line of 0, 1, 4, 9 …)
    assert chart.alt_txt == "Line chart. 0 1; 1 4; 2 9"
