"""The app against the stricter fake Slack: channels the bot is not in, files shared from
Slack Connect channels, and the bot's own messages coming back as events."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack_harness import CHANNEL, running_bot
from tests.support import POPULATION_CSV

CLASSIC = {"slack_ui": "classic"}  # tests whose timing is the classic UI's
ELSEWHERE, OTHER = "C0ELSE001", "C0OTHER01"


def first_question(req: ModelRequest) -> str:
    return str(req.messages[0]["content"][-1]["text"])


def answer(req: ModelRequest) -> Reply:
    return Reply([text(f"answer to: {first_question(req)}")])


async def test_analyze_in_a_channel_without_the_bot_is_answered_privately(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"outside": [ELSEWHERE]}
    async with running_bot("local", answer, sandbox_root, monkeypatch, options) as h:
        # A public address, not a name: a name that cannot be looked up here is refused.
        url = "https://140.82.112.3/acme/data"
        envelope = await h.slack.slash_command("/analyze", url, channel=ELSEWHERE)
        assert "payload" not in await h.slack.wait_for_ack(envelope)  # accepted at first
        await h.slack.wait_for(lambda: h.slack.responses)
        # and the bot carries on where it is a member
        message = await h.slack.post_user_message(CHANNEL, "still there?", mention=True)
        await h.wait_for_text(message["ts"], "answer to: still there?")

    [response] = h.slack.responses
    assert response["response_type"] == "ephemeral"
    assert "I'm not in this channel" in response["text"] and "/invite" in response["text"]
    [refused] = h.slack.calls_to("chat.postMessage")[:1]
    assert (refused.args["channel"], refused.error) == (ELSEWHERE, "not_in_channel")
    assert ELSEWHERE not in h.slack.messages  # nothing was posted there
    assert len(h.model.requests) == 1  # only the question where the bot is


async def test_a_bot_removed_mid_run_stops_the_run_and_says_so_once(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    gate = asyncio.Event()

    async def script(req: ModelRequest) -> Reply:
        if first_question(req) != "go":
            return answer(req)
        if req.turn:
            await gate.wait()  # the bot is taken out of the channel meanwhile
        return Reply([tool_use("run_code", {"language": "python", "code": f"print({req.turn})"})])

    async with running_bot("local", script, sandbox_root, monkeypatch, **CLASSIC) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "go", mention=True))["ts"]
        await h.wait_for_text(thread, "Step 1")
        await h.slack.wait_for(lambda: len(h.model.requests) == 2)  # step 1 ran
        h.slack.remove_bot(CHANNEL)
        gate.set()
        runs = await h.wait_for_runs(thread, 1)
        message = await h.slack.post_user_message(OTHER, "anyone?", mention=True)
        await h.slack.wait_for(lambda: "answer to: anyone?" in str(h.slack.messages[OTHER]))

    assert runs == [("go", "failed")]
    assert "Step 2" not in h.texts(thread) and len(h.model.requests) == 3
    gone = [r for r in caplog.records if r.name == "bot.slack.view.run_view"]
    assert [r.levelname for r in gone] == ["WARNING"]
    assert f"channel {CHANNEL}" in gone[0].getMessage() and "Invite the bot back" in gone[0].message
    assert not [r for r in caplog.records if r.getMessage() == "a run failed"]  # no crash
    assert message["ts"] in {m.get("thread_ts") for m in h.slack.messages[OTHER]}


async def test_a_bot_removed_mid_run_stops_its_streamed_run(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The agent UI streams in the background: Slack's not_in_channel to a stream call
    stops the run at its next step, as a refused post does in the classic UI."""
    gate = asyncio.Event()

    async def script(req: ModelRequest) -> Reply:
        if req.turn:
            await gate.wait()
        code = f"print({req.turn})"
        return Reply([tool_use("run_code", {"language": "python", "code": code})], delay_s=0.3)

    async with running_bot("local", script, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "go", mention=True))["ts"]
        await h.slack.wait_for(lambda: h.slack.streams)
        h.slack.remove_bot(CHANNEL)
        gate.set()
        runs = await h.wait_for_runs(thread, 1)

    assert runs == [("go", "failed")]
    assert len(h.model.requests) < h.settings.max_turns  # stopped, not run out
    gone = [r for r in caplog.records if r.name == "bot.slack.view.run_view"]
    assert [r.levelname for r in gone] == ["WARNING"] and "Invite the bot back" in gone[0].message
    assert not [r for r in caplog.records if r.getMessage() == "a run failed"]  # no crash


async def test_a_slack_connect_stub_file_is_looked_up_then_fetched_through_the_cdn(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_bot("local", answer, sandbox_root, monkeypatch) as h:
        csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
        stub = h.slack.stub_of(csv)
        message = await h.slack.post_user_message(CHANNEL, "rows?", files=[stub], mention=True)
        await h.wait_for_text(message["ts"], "answer to: rows?")
        texts = h.texts(message["ts"])

    assert f"*{POPULATION_CSV.name}* · CSV · 795 rows × 4 columns" in texts
    [info] = h.slack.calls_to("files.info")
    assert info.args["file"] == csv["id"] and info.error is None
    assert h.slack.cdn is not None and len(h.slack.cdn.requests) == 1
    assert h.slack.cdn.tokens_seen == []  # the bot token went to Slack's host only
    assert h.slack.downloads == [(csv["id"], True)]


async def test_the_bots_own_messages_come_back_and_are_not_answered(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def script(req: ModelRequest) -> Reply:
        if not req.tool_results():
            return Reply([tool_use("run_code", {"language": "python", "code": "print(6 * 7)"})])
        return Reply([text("It is 42.")])

    async with running_bot("local", script, sandbox_root, monkeypatch, **CLASSIC) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "6 times 7?", mention=True))["ts"]
        await h.wait_for_text(thread, "It is 42.")
        again = await h.slack.post_user_message(CHANNEL, "and again?", thread_ts=thread)
        runs = await h.wait_for_runs(thread, 2)
        own = [e for e in h.slack.envelopes if e["payload"]["event"].get("bot_id")]
        changed = [
            e
            for e in h.slack.envelopes
            if e["payload"]["event"].get("subtype") == "message_changed"
        ]
        for envelope in own + changed:  # Bolt took each, and dropped it
            await h.slack.wait_for_ack(envelope["envelope_id"])

    assert runs == [("6 times 7?", "finished"), ("and again?", "finished")]
    assert len(own) >= 4 and len(changed) >= 2  # status, step and answer posts; their edits
    assert len(h.model.requests) == 4  # two runs of two turns: nothing answered itself
    assert [r[1] for r in h.slack.reactions] == [thread, again["ts"]]  # on the questions only
    assert [m.get("text") for m in h.bot_messages(thread)].count("It is 42.") == 2
