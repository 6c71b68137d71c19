"""The Show work and Notebook buttons under an answer, end to end with the real bot: Show
work opens a modal built from the store (so also after a restart), within a modal's
limits however many figures there are; Notebook uploads the thread's .ipynb. The figure
checker that records an answer's figures lands separately: the tests record them through
the store, for the run the button names."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import nbformat
import pytest
from slack_sdk.models.views import View

from bot.slack.render import show_work, wording
from bot.store.base import RunRecord, ToolCallRecord
from bot.store.sqlite import SqliteStore
from tests.e2e.test_guard_rails import echo
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.fakes.slack.views import modal_problems
from tests.scripts import population_analyst, population_charted
from tests.slack.test_slack_e2e import CLASSIC, mention_with_csv
from tests.slack_harness import CHANNEL, Harness, all_text, bot_process, fake_world, running_bot
from tests.support import matplotlib_in_sandbox

FIGURE = "1,402,617,695"  # China's 2020 population, which the compute step printed
TEAM = {"allowed_users": "U0HUMAN01,U0HUMAN02"}
SESSIONS = "agents.sessions.setStatus"  # a workspace without agent sessions: one refusal


def with_button(h: Harness, thread: str, action_id: str) -> list[dict[str, Any]]:
    return [m for m in h.bot_messages(thread) if f"'{action_id}'" in str(m.get("blocks"))]


def button_value(message: dict[str, Any], action_id: str) -> str:
    for block in message["blocks"]:
        for element in block.get("elements") or []:
            if element.get("action_id") == action_id:
                return str(element["value"])
    raise LookupError(action_id)


def modal_text(view: dict[str, Any]) -> str:
    return all_text({"blocks": view["blocks"]})


async def record_figures(h: Harness, run_id: str, n_more: int = 0) -> dict[str, Any]:
    """What the figure checker would record for the population answer: FIGURE, traced to
    the step that computed it, and a figure found in no output; `n_more` further traced
    figures. Returns the traced one."""
    store = SqliteStore(h.settings.store_path)
    await store.open()
    try:
        # after the run's own record (the engine writes it as the run ends), not before it
        ended = lambda: store.get_run(run_id)  # noqa: E731
        for _ in range(300):
            run = await ended()
            if run is not None and run.outcome is not None:
                break
            await asyncio.sleep(0.1)
        assert run is not None and run.outcome is not None
        calls = [c for c in await store.tool_calls(run.key) if c.run_id == run_id]
        step, call = next((i, c) for i, c in enumerate(calls, 1) if "1402617695" in c.excerpt)
        line = next(x for x in call.excerpt.splitlines() if "1402617695" in x)
        traced = {"text": FIGURE, "step": step, "line": line, "call_id": call.call_id}
        lost = {"text": "99.9%", "step": None, "line": "", "call_id": None}
        more = [{**traced, "text": f"{i:,}"} for i in range(1000, 1000 + n_more)]
        await store.record_figures(run_id, [traced, lost, *more])
        return {**traced, "code": call.code}
    finally:
        await store.close()


async def open_show_work(h: Harness, answer: dict[str, Any], **click: Any) -> dict[str, Any]:
    opened = len(h.slack.views_opened)
    await h.slack.click_button(answer, "show_work", **click)
    await h.slack.wait_for(lambda: len(h.slack.views_opened) > opened)
    return h.slack.views_opened[-1]


def assert_shows(view: dict[str, Any], traced: dict[str, Any]) -> None:
    said = modal_text(view)
    assert view["title"]["text"] == "Show work"
    assert FIGURE in said and f"Step {traced['step']}" in said
    assert "csv.DictReader" in said  # the step's code
    assert traced["line"][:200].replace("&", "&amp;") in said  # the line it printed
    assert "99.9%" in said and "not found in any step's output" in said.lower()


def expired(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The bot's own warning of a trigger that came too late (not Bolt's of a listener
    that raised)."""
    return [
        r
        for r in caplog.records
        if r.name == "bot.slack.listen.work_buttons" and "expired_trigger_id" in r.getMessage()
    ]


async def test_show_work_opens_from_the_store_also_after_a_restart(
    sandbox_root: Path, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with fake_world("local", population_analyst, sandbox_root, monkeypatch) as h:
        async with bot_process(h):
            thread = await mention_with_csv(h)
            await h.slack.wait_for(lambda: with_button(h, thread, "show_work"), 30)
            [answer] = with_button(h, thread, "show_work")
            run_id = button_value(answer, "show_work")
            traced = await record_figures(h, run_id)
            first = await open_show_work(h, answer)
        async with bot_process(h):  # another process, the same store
            again = await open_show_work(h, answer, user="U0HUMAN02")
            await record_figures(h, run_id, n_more=300)
            many = await open_show_work(h, answer)
            caplog.set_level(logging.WARNING, logger="bot.slack.listen.work_buttons")
            calls = len(h.slack.calls_to("views.open"))
            await h.slack.click_button(answer, "show_work", trigger_age_s=5.0)
            await h.slack.wait_for(lambda: len(h.slack.calls_to("views.open")) > calls)
            await h.slack.wait_for(lambda: expired(caplog))
            still = await open_show_work(h, answer)  # the bot goes on

    assert button_value(answer, "notebook") == run_id
    assert_shows(first, traced)
    assert_shows(again, traced)
    assert first["private_metadata"] == run_id
    # 302 figures: the first ones while they fit in 100 blocks, then how many more
    assert len(many["blocks"]) <= 100 and FIGURE in modal_text(many)
    shown = modal_text(many).count("*1,")  # FIGURE, then 1,000 on (the lost one comes last)
    more = 302 - shown
    assert more > 0 and f"… and {more} more figures" in str(many["blocks"][-1])
    assert still["blocks"] == many["blocks"]
    assert not [c for c in h.slack.calls if c.error and c.method not in (SESSIONS, "views.open")]
    assert [c.error for c in h.slack.calls_to("views.open")].count("expired_trigger_id") == 1
    [warning] = expired(caplog)
    assert warning.levelname == "WARNING" and run_id in warning.getMessage()


def no_figures(req: ModelRequest) -> Reply:
    if not req.tool_results():
        return Reply([tool_use("run_code", {"language": "python", "code": "print('hello')"})])
    return Reply([text("It said hello.")])


async def test_a_run_without_figures_says_so(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot("local", no_figures, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "greet", mention=True))["ts"]
        await h.slack.wait_for(lambda: with_button(h, thread, "show_work"), 30)
        [answer] = with_button(h, thread, "show_work")
        view = await open_show_work(h, answer)

    assert "No figures were recorded" in modal_text(view)


async def test_notebook_uploads_the_threads_ipynb_in_the_classic_style(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", population_analyst, sandbox_root, monkeypatch, **CLASSIC) as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: with_button(h, thread, "notebook"), 30)
        [answer] = with_button(h, thread, "notebook")
        run_id = button_value(answer, "notebook")
        traced = await record_figures(h, run_id)
        view = await open_show_work(h, answer)
        await h.slack.click_button(answer, "notebook")
        name = f"{thread}.ipynb"
        await h.slack.wait_for(lambda: any(u.filename == name for u in h.slack.uploads.values()))
        [upload] = [u for u in h.slack.uploads.values() if u.filename == name]

    # under the footer of the answer's last message (its tables come as messages of their own)
    *_, footer, buttons = answer["blocks"]
    assert "5 turns" in all_text({"blocks": [footer]}) and buttons["type"] == "actions"
    assert button_value(answer, "show_work") == run_id
    assert_shows(view, traced)
    assert (upload.channel_id, upload.thread_ts) == (CHANNEL, thread)
    book = nbformat.reads(upload.content.decode(), as_version=4)
    nbformat.validate(book)
    sources = "\n".join("".join(cell["source"]) for cell in book["cells"])
    assert "csv.DictReader" in sources and "## Question 1" in sources
    assert not [c for c in h.slack.calls if c.error and c.method != SESSIONS]


def one_step(req: ModelRequest) -> Reply:
    """One step, then an answer."""
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "python", "code": "print(6 * 7)"})])
    return Reply([text("It is 42.")])


async def test_the_buttons_obey_the_policy_and_a_failed_notebook_is_told_privately(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", one_step, sandbox_root, monkeypatch, **TEAM) as h:
        message = await h.slack.post_user_message(CHANNEL, "six times seven?", mention=True)
        thread = message["ts"]
        await h.slack.wait_for(lambda: with_button(h, thread, "show_work"), 30)
        [answer] = with_button(h, thread, "show_work")
        for action in ("show_work", "notebook"):
            await h.slack.click_button(answer, action, user="U0STRANGER")
        told = lambda: [e for e in h.slack.ephemerals if e["user"] == "U0STRANGER"]  # noqa: E731
        await h.slack.wait_for(lambda: len(told()) == 2)
        view = await open_show_work(h, answer, user="U0HUMAN02")
        h.slack.fail_next("files.getUploadURLExternal", status=200, error="internal_error")
        await h.slack.click_button(answer, "notebook", user="U0HUMAN02")
        failed = lambda: [e for e in h.slack.ephemerals if e["user"] == "U0HUMAN02"]  # noqa: E731
        await h.slack.wait_for(failed)

    assert all("not on it" in e["text"] for e in told())
    assert [e["text"] for e in failed()] == [wording.NOTEBOOK_FAILED]
    assert failed()[0]["thread_ts"] == thread
    assert len(h.slack.views_opened) == 1 and "*Step 1*" in modal_text(view)
    assert "*42*" in modal_text(view)
    assert not h.slack.uploads


async def test_a_run_that_only_answered_has_no_buttons(sandbox_root: Path, monkeypatch) -> None:
    for style in ({}, CLASSIC):
        async with running_bot("local", echo, sandbox_root, monkeypatch, **style) as h:
            thread = (await h.slack.post_user_message(CHANNEL, "hi", mention=True))["ts"]
            await h.wait_for_runs(thread, 1)
            await h.slack.wait_for(lambda h=h, t=thread: "answer to: hi" in h.texts(t))
            blocks = json.dumps([m.get("blocks") for m in h.bot_messages(thread)])

        assert "feedback" in blocks or style
        assert "show_work" not in blocks and '"notebook"' not in blocks


# -- the modal itself, at its largest (pure)


def call(n: int, code: str) -> ToolCallRecord:
    return ToolCallRecord("run-1", f"toolu_{n}", "run_code", "python", code, "ok", 0, 1.0, "", 0.0)


def run_with(figures: list[dict[str, Any]]) -> RunRecord:
    return RunRecord("T:C:1.2", "run-1", "q", 0.0, 1.0, "finished", figures=tuple(figures))


@pytest.mark.parametrize("n", [1, 92, 93, 300])
def test_the_modal_keeps_slacks_limits_however_many_and_long_the_figures(n: int) -> None:
    calls = [call(1, "x = '<&>'\n" * 5000), call(2, "print(x)")]
    figures = [
        {"text": f"{i:,} <&> " * 50, "step": 1 + i % 2, "line": "y" * 10_000, "call_id": None}
        for i in range(n)
    ]
    view = show_work.modal(run_with(figures), calls)

    assert modal_problems(view) == [] and View(**view).validate_json() is None
    blocks = view["blocks"]
    assert len(blocks) <= 100
    shown = sum(wording.OUTPUT_LINE in str(b.get("text")) for b in blocks)
    if shown < n:
        assert (
            blocks[-1]["text"]["text"] == f"_… and {n - shown} more figure{'s' * (n - shown > 1)}_"
        )
    else:
        assert "more figure" not in modal_text(view)
    # a block each, under their two steps' heading and code (3 blocks each), in the 98 left
    # by the introduction and the end
    assert shown == min(n, 92)


def test_a_figure_is_found_by_its_call_id_else_by_its_step() -> None:
    calls = [call(1, "print('first')"), call(2, "print('second')")]
    by_id = {"text": "1", "step": 1, "line": "1", "call_id": "toolu_2"}
    by_step = {"text": "2", "step": 1, "line": "2", "call_id": "toolu_gone"}
    first, second = (
        show_work.step_blocks(1, show_work._call_of(f, calls, {c.call_id: c for c in calls}))
        for f in (by_id, by_step)
    )

    assert "second" in str(first) and "first" in str(second)


def test_no_run_or_no_figures_says_so() -> None:
    assert wording.RUN_GONE in modal_text(show_work.modal(None, []))
    assert wording.NO_FIGURES in modal_text(show_work.modal(run_with([]), []))


async def test_show_work_shows_what_the_checker_traced(sandbox_root: Path, monkeypatch) -> None:
    """No figures written by the test: the run's own check recorded them."""
    async with running_bot("local", population_analyst, sandbox_root, monkeypatch) as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: with_button(h, thread, "show_work"), 30)
        await h.wait_for_text(thread, "all traced to step")
        [answer] = with_button(h, thread, "show_work")
        view = await open_show_work(h, answer)
    said = modal_text(view)
    assert FIGURE in said and "Step 3" in said  # the compute step printed it
    assert "csv.DictReader" in said and "not found" not in said


@pytest.mark.skipif(not matplotlib_in_sandbox(), reason="the sandbox's python3 has no matplotlib")
async def test_the_notebook_holds_each_chart_under_the_step_that_saved_it(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", population_charted, sandbox_root, monkeypatch) as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: with_button(h, thread, "notebook"), 30)
        shared = lambda name: [u for u in h.slack.uploads.values()  # noqa: E731
                               if u.filename == name and u.shared_ts]  # fmt: skip
        await h.slack.wait_for(lambda: shared("growth.png"), 30)
        [answer] = with_button(h, thread, "notebook")
        await h.slack.click_button(answer, "notebook")
        await h.slack.wait_for(lambda: shared(f"{thread}.ipynb"), 30)
        [upload] = shared(f"{thread}.ipynb")
        [png] = shared("growth.png")

    book = nbformat.reads(upload.content.decode(), as_version=4)
    nbformat.validate(book)
    images = [
        (cell, out["data"]["image/png"])
        for cell in book["cells"] if cell["cell_type"] == "code"
        for out in cell.get("outputs", []) if "image/png" in out.get("data", {})
    ]  # fmt: skip
    [(cell, data)] = images
    assert "plt.savefig('/buddy/work/out/growth.png')" in "".join(cell["source"])
    assert base64.b64decode(data) == png.content  # the PNG the thread holds


@pytest.mark.skipif(not matplotlib_in_sandbox(), reason="the sandbox's python3 has no matplotlib")
async def test_the_notebook_takes_the_bots_own_charts_not_a_png_of_the_same_name(
    sandbox_root: Path, monkeypatch
) -> None:
    """Someone shares a PNG named like the run's chart in the thread: the notebook shows the
    chart the bot uploaded (its file id kept), never theirs."""
    async with running_bot("local", population_charted, sandbox_root, monkeypatch) as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: with_button(h, thread, "notebook"), 30)
        shared = lambda name: [u for u in h.slack.uploads.values()  # noqa: E731
                               if u.filename == name and u.shared_ts]  # fmt: skip
        await h.slack.wait_for(lambda: shared("growth.png"), 30)
        theirs = b"\x89PNG\r\n\x1a\n" + b"someone else's picture"
        decoy = h.slack.add_file(
            "growth.png", theirs, mimetype="image/png", filetype="png", user="U0HUMAN02"
        )
        h.slack.add_user_message(CHANNEL, "mine", user="U0HUMAN02", thread_ts=thread, files=[decoy])
        [answer] = with_button(h, thread, "notebook")
        await h.slack.click_button(answer, "notebook")
        await h.slack.wait_for(lambda: shared(f"{thread}.ipynb"), 30)
        [upload] = shared(f"{thread}.ipynb")
        [png] = shared("growth.png")

    book = nbformat.reads(upload.content.decode(), as_version=4)
    nbformat.validate(book)
    images = [
        base64.b64decode(out["data"]["image/png"])
        for cell in book["cells"] if cell["cell_type"] == "code"
        for out in cell.get("outputs", []) if "image/png" in out.get("data", {})
    ]  # fmt: skip
    assert images == [png.content]
    assert theirs not in images
