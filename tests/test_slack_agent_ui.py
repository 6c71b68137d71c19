"""The agent style in Slack (SLACK_UI=agent) end to end: the thread's status, one streamed
message per run with a task per tool call and the answer, and the fallbacks."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.store.sqlite import SqliteStore
from tests.scripts import population_analyst
from tests.slack_harness import CHANNEL, running_bot
from tests.test_slack_e2e import mention_with_csv

NUMBERS = ("1,402,617,695", "1,411,100,000", "213,996,181")


def streamed(h, thread: str) -> list:
    return [
        h.slack.find_message(CHANNEL, s.ts)
        for s in h.slack.streams.values()
        if h.slack.find_message(CHANNEL, s.ts).get("thread_ts") == thread
    ]


async def feedback_on(h, thread: str) -> list:
    """The thread's recorded feedback, once there is some (or after 10 s)."""
    store = SqliteStore(h.settings.store_path)
    await store.open()
    try:
        for _ in range(100):
            if ratings := await store.feedback(f"T0FAKE001:{CHANNEL}:{thread}"):
                return ratings
            await asyncio.sleep(0.1)
        return []
    finally:
        await store.close()


async def test_agent_mode_shows_status_then_one_streamed_message(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(
        backend, population_analyst, sandbox_root, monkeypatch, slack_ui="agent"
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        texts = h.texts(thread)
        statuses = h.slack.status_history(CHANNEL, thread)
        [answer] = streamed(h, thread)
        await h.slack.click_button(answer, "feedback", user="U0HUMAN02", value="bad")
        ratings = await feedback_on(h, thread)
        loading = [s.loading_messages for s in h.slack.statuses if s.status]

    assert statuses[0] == "is analyzing your data…" and statuses[-1] == ""
    assert any("Step 1 · " in m[0] for m in loading if m), loading
    [message] = streamed(h, thread)
    stream = h.slack.streams[message["ts"]]
    assert stream.stopped and stream.recipient == ("U0HUMAN01", "T0FAKE001")
    plan = message["blocks"][0]
    assert plan["type"] == "plan" and len(plan["tasks"]) == 4
    assert {t["status"] for t in plan["tasks"]} <= {"complete", "error"}
    assert any("import polars" in t.get("details", "") for t in plan["tasks"])
    assert any("ModuleNotFoundError" in t.get("output", "") for t in plan["tasks"])
    assert all(n in message["text"] for n in NUMBERS)
    assert message["blocks"][-1]["type"] == "context_actions"
    assert not [m for m in h.bot_messages(thread) if (m.get("text") or "").startswith("Step ")]
    stop_line = next(m for m in h.bot_messages(thread) if "Working on it" in str(m.history))
    assert "Done" in stop_line["text"] and "actions" not in str(stop_line["blocks"])
    assert "5 turns" in texts
    assert [(r.user, r.value) for r in ratings] == [("U0HUMAN02", "bad")]


async def test_stream_expiry_mid_answer_loses_no_text(sandbox_root: Path, monkeypatch) -> None:
    options = {"stream_lifetime_s": 0.0}
    async with running_bot(
        "local", population_analyst, sandbox_root, monkeypatch, options, slack_ui="agent"
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        texts = h.texts(thread)
        errors = [c.error for c in h.slack.calls_to("chat.appendStream")]

    assert "message_not_in_streaming_state" in errors
    assert all(n in texts for n in NUMBERS)
    assert "context_actions" in str([m.get("blocks") for m in h.bot_messages(thread)])


async def test_a_workspace_refusing_streams_gets_the_classic_view(
    sandbox_root: Path, monkeypatch
) -> None:
    options = {"ai_refusal": "feature_not_enabled"}
    async with running_bot(
        "local", population_analyst, sandbox_root, monkeypatch, options, slack_ui="agent"
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        steps = [m for m in h.bot_messages(thread) if "Step" in (m.get("text") or "")]
        texts = h.texts(thread)

    assert len(steps) == 4 and all(n in texts for n in NUMBERS)
    assert not h.slack.streams
    assert len(h.slack.calls_to("assistant.threads.setStatus")) == 2  # tried, then cleared
