"""What holds of an answer's figures, end to end: under the answer in both Slack UI styles,
kept with the run in the store by the engine, and in `sessions export`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.run_events import RunFinished
from bot.sessions.events import RunStarted
from tests.agent.test_agent_loop import run_python
from tests.fakes.anthropic import Reply, text
from tests.scripts import population_analyst
from tests.sessions.test_engine import KEY, engine_on
from tests.sessions.test_restarts import _run_bot
from tests.slack.test_slack_e2e import mention_with_csv
from tests.slack_harness import CHANNEL, bot_process, fake_world, running_bot
from tests.support import settings_env

# The population answer: a table of three countries' 2000, 2020 and increase, all printed
# by step 3's JSON (step 1 lists the files, step 2 fails on polars, step 4 writes the report).
NOTE = "9 figures, all traced to step 3"
FOOTER = re.compile(r"5 turns · \$\d+\.\d{4}( of \$\d+\.\d{2})? · \d+s · " + NOTE + "$")


def footers(h, thread: str) -> list[str]:
    """The text of every context block the bot posted in the thread."""
    return [
        element.get("text", "")
        for message in h.bot_messages(thread)
        for block in message.get("blocks") or []
        if block.get("type") == "context"
        for element in block.get("elements", [])
    ]


@pytest.mark.parametrize("ui", ["classic", "agent"])
async def test_the_footer_says_the_answers_figures_are_all_traced(
    ui: str, sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(
        "local", population_analyst, sandbox_root, monkeypatch, slack_ui=ui
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, NOTE)
        requests = len(h.model.requests)
    assert [f for f in footers(h, thread) if FOOTER.fullmatch(f)], footers(h, thread)
    assert requests == 5  # no correction turn: the answer held


async def test_the_run_keeps_its_figures_and_the_export_shows_them(
    sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world("local", population_analyst, sandbox_root, monkeypatch) as h:
        async with bot_process(h):
            thread = await mention_with_csv(h)
            await h.wait_for_text(thread, NOTE)
        env = settings_env(h.settings)
        exported = await _run_bot(env, sandbox_root, "sessions", "export", thread)
    lines = [json.loads(line) for line in exported.splitlines()]
    calls = [line for line in lines if "tool" in line]
    [run] = [line["run"] for line in lines if "run" in line]
    assert run["outcome"] == "finished" and len(run["figures"]) == 9
    assert {f["step"] for f in run["figures"]} == {3}
    assert {f["call_id"] for f in run["figures"]} == {calls[2]["call_id"]}
    assert "1,402,617,695" in [f["text"] for f in run["figures"]]
    assert all(f["line"] for f in run["figures"])
    assert run["key"] == f"T0FAKE001:{CHANNEL}:{thread}"


async def test_the_engine_records_each_figure_with_its_call(sandbox_root: Path) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([run_python("print('rows', 1234)"), run_python("print(56789)")])
        if req.turn == 1:
            return Reply([text("56,789 people in 1,234 rows.")])
        if req.turn == 2:
            return Reply([text("Still 56,789 people, and 4,242 more.")])  # 4,242: made up
        return Reply([text("Still 56,789 people.")])

    async with engine_on(script, sandbox_root) as (engine, views, store, _):
        first = await (await engine.ask(KEY, "how many?", user="U1"))
        second = await (await engine.ask(KEY, "again?", user="U1"))
        first_run, second_run = (e.run_id for e in views.of(RunStarted))
        calls = [c.call_id for c in await store.tool_calls(KEY)]
        recorded = (await store.get_run(first_run)).figures
        again = (await store.get_run(second_run)).figures
    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert recorded == (
        {"text": "56,789", "step": 2, "line": "56789", "call_id": calls[1], "earlier": 0},
        {"text": "1,234", "step": 1, "line": "rows 1234", "call_id": calls[0], "earlier": 0},
    )
    # The follow-up ran no step: its figure is the previous question's step 2.
    assert second.figures_note == "1 figure, traced to step 2 of the previous question"
    assert again == (
        {"text": "56,789", "step": 2, "line": "56789", "call_id": calls[1], "earlier": 1},
    )
