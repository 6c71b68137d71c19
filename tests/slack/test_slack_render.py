"""The renderer (block_kit.py, stream_chunks.py, wording.py): one test per event kind and UI
style. Pure functions: payloads in, payloads out; the blocks pass the fake's Block Kit
checks (what Slack refuses, it refuses)."""

from __future__ import annotations

import dataclasses
from typing import Any

from bot.run_events import RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack.render import block_kit, stream_chunks, wording
from bot.usage import Usage
from tests.fakes.slack.kit import block_problems

STARTED = ToolCallStarted("toolu_1", "run_code", "python", "import pandas\nprint(1)")
ENDED = ToolCallFinished("toolu_1", "run_code", "ok", 0, 1.25, "1\n", "python", STARTED.code)
FAILED = ToolCallFinished("toolu_1", "run_code", "error", 1, 0.5, "Traceback", "python", "x")
DONE = RunFinished("**42** rows.", turns=2, usage=Usage(), cost_usd=0.01, stop="end_turn")
KEY = "T0FAKE001:C0CHAN001:1767225600.000100"


def texts(blocks: list[dict[str, Any]]) -> str:
    """The text of sections and context elements, joined."""
    said = []
    for block in blocks:
        text = block.get("text")
        said.append(text.get("text", "") if isinstance(text, dict) else str(text or ""))
    return "\n".join(said)


# -- classic: messages per step --


def test_classic_a_started_step_names_its_language_and_shows_its_code() -> None:
    text, blocks = block_kit.tool_started(3, STARTED)
    assert text == "Step 3: python"
    assert "print(1)" in texts(blocks) and block_problems(blocks) == []


def test_classic_a_finished_step_needs_only_its_end() -> None:
    text, blocks = block_kit.tool_finished(3, ENDED)
    assert text == "Step 3: python ok"
    assert "exit 0" in texts(blocks) and "print(1)" in texts(blocks)
    assert block_problems(blocks) == []
    assert ":x:" in texts(block_kit.tool_finished(1, FAILED)[1])


def test_classic_the_status_line_has_a_stop_button_while_the_run_can_stop() -> None:
    line = block_kit.status_line(wording.WORKING, 2, 7.4)
    assert line.endswith("· 2 steps · 7s")
    with_stop = block_kit.status(line, run_id="run-1")
    assert with_stop[1]["elements"][0]["action_id"] == block_kit.STOP_ACTION
    assert len(block_kit.status(line, run_id=None)) == 1
    assert block_problems(with_stop) == []


def test_classic_the_answer_ends_with_its_footer() -> None:
    [(text, blocks)] = block_kit.answer_messages(DONE, 12.0)
    assert text == DONE.answer and blocks[0] == {"type": "markdown", "text": DONE.answer}
    assert "2 turns · $0.0100 · 12s" in texts(blocks[1]["elements"])
    assert block_problems(blocks) == []


def test_classic_a_note_is_one_section() -> None:
    text, blocks = block_kit.note(wording.stopped("U1"))
    assert text == ":octagonal_sign: Stopped by <@U1>. Ask again when you are ready."
    assert blocks == [block_kit.section(text)]


def test_a_budget_note_carries_a_continue_button_naming_its_grant() -> None:
    blocks = block_kit.continue_button(wording.budget_stop(1.0), KEY, 2.0, "run:r1")
    button = blocks[1]["elements"][0]
    assert block_kit.continue_value(button["value"]) == (KEY, "run:r1")
    assert "+$2.00" in button["text"]["text"] and block_problems(blocks) == []


# -- agent: one streamed message --


def test_agent_the_opening_is_a_plan_the_file_tasks_and_a_stop_button() -> None:
    task = stream_chunks.file_task("Read a.csv", "→ data/a.csv", ok=True, task_id="file-1")
    plan, file_task, stop = stream_chunks.plan_opening("run-1", [task])
    assert plan == {"type": "plan_update", "title": stream_chunks.PLAN_TITLE}
    assert file_task["status"] == "complete" and file_task["id"] == "file-1"
    assert block_problems(stop["blocks"]) == []


def test_agent_a_started_step_is_a_task_in_progress() -> None:
    chunk = stream_chunks.task_started(1, STARTED)
    assert chunk["status"] == "in_progress" and chunk["id"] == STARTED.call_id
    assert chunk["title"] == "Step 1 · python: import pandas"
    assert "print(1)" in chunk["details"]


def test_agent_a_finished_step_repeats_its_title_from_its_end_alone() -> None:
    chunk = stream_chunks.task_finished(1, ENDED)
    assert chunk["title"] == stream_chunks.task_started(1, STARTED)["title"]
    assert chunk["status"] == "complete" and chunk["output"].startswith("ok · 1.2s")
    assert stream_chunks.task_finished(1, FAILED)["status"] == "error"


def test_agent_updates_of_one_task_merge_where_it_first_appeared() -> None:
    chunks = [
        stream_chunks.task_started(1, STARTED),
        stream_chunks.markdown_chunk("so far"),
        stream_chunks.task_finished(1, ENDED),
    ]
    first, text = stream_chunks.merged(chunks)
    assert first["status"] == "complete" and text["text"] == "so far"


def test_agent_the_answer_ends_with_footer_and_feedback() -> None:
    footer, feedback = block_kit.answer_end(DONE, 5.0, "run-1")
    assert footer["type"] == "context" and feedback["block_id"] == "feedback:run-1"
    assert block_problems([footer, feedback]) == []


def test_agent_what_does_not_fit_the_stream_goes_on_in_messages() -> None:
    posts = block_kit.markdown_posts(["one", "  ", "two"], [block_kit.feedback("r")])
    assert [text for text, _ in posts] == ["one", "two"]
    assert posts[-1][1][-1]["type"] == "context_actions" and len(posts[0][1]) == 1
    assert block_kit.markdown_posts([], []) == [(" ", [{"type": "markdown", "text": " "}])]


# -- notes and files, either style --


def test_a_chart_gets_alt_text_and_a_report_none() -> None:
    assert block_kit.upload("chart.png", b"x")["alt_txt"] == "Chart from the analysis: chart"
    assert "alt_txt" not in block_kit.upload("report.md", b"x")


def test_the_notes_say_how_long_a_stopped_sandbox_keeps_its_files() -> None:
    assert "kept for 3 hours" in wording.suspended(3 * 3600)
    assert wording.suspended(0) == wording.IDLE
    assert wording.failed("boom") == ":warning: boom"


def test_the_footer_says_what_holds_of_the_figures_in_both_styles() -> None:
    note = "12 figures, all traced to steps 2–4"
    traced = dataclasses.replace(DONE, figures_note=note)
    line = "2 turns · $0.0100 · 14s · 12 figures, all traced to steps 2–4"
    assert block_kit.footer(traced, 14.0) == line
    assert block_kit.footer(DONE, 14.0) == "2 turns · $0.0100 · 14s"  # no figures: nothing added
    classic = block_kit.answer_messages(traced, 14.0)[-1][1][-1]
    agent, _ = block_kit.answer_end(traced, 14.0, "run-1")
    assert classic == agent == {"type": "context", "elements": [{"type": "mrkdwn", "text": line}]}
    long = dataclasses.replace(DONE, figures_note="not found: " + "<1> " * 1000)
    [block] = block_kit.answer_end(long, 14.0, "run-1")[:1]
    assert block_problems([block]) == [] and "&lt;1&gt;" in str(block)
