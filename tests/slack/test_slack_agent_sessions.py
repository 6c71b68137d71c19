"""Slack's agent sessions, end to end: the real bot against the fakes. The thread's session
is `processing` while a run goes and `active` once it ends (`closed` when its sandbox is
shut down for idleness); Slack's stop button on it stops the run as the Stop button does,
with the same rules on who may; a workspace without sessions sees the bot as before."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.e2e.test_guard_rails import echo
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack_harness import CHANNEL, Harness, running_bot
from tests.support import CHECKOUT

SESSIONS = {"agent_sessions": True}
SLEEP = "sleep 61.25"  # one no other test runs: its process is found by its command line
NAP = "sleep 4.25"  # long enough to press stop during it
TEAM = {"allowed_users": "U0HUMAN01,U0HUMAN02"}


def sleeper(req: ModelRequest) -> Reply:
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "bash", "code": SLEEP})])
    return Reply([text("should not get here")])


def one_step(req: ModelRequest) -> Reply:
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "bash", "code": "echo hi"})])
    return Reply([text("all done")])


def sleeping(command: str = SLEEP) -> bool:
    """Whether the run's `sleep` is alive on this machine (both backends run it here)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().replace(b"\0", b" ").strip() == command.encode():
                return True
        except OSError:
            continue  # it ended as we looked
    return False


def bot_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("bot") and r.levelno >= logging.WARNING
    ]


def told(h: Harness, user: str) -> list[str]:
    return [e.get("text", "") for e in h.slack.ephemerals if e["user"] == user]


def history(h: Harness, thread: str) -> list[str]:
    return h.slack.session_history(CHANNEL, thread)


async def test_the_sessions_stop_stops_the_run(
    backend: str, sandbox_root: Path, monkeypatch, caplog
) -> None:
    async with running_bot(backend, sleeper, sandbox_root, monkeypatch, SESSIONS) as h:
        message = await h.slack.post_user_message(CHANNEL, "wait a minute", mention=True)
        thread = message["ts"]
        await h.slack.wait_for(sleeping, 30)
        assert h.slack.session_status(CHANNEL, thread) == "processing"
        envelope_id = await h.slack.press_session_stop(CHANNEL, thread)
        await h.slack.wait_for_ack(envelope_id)
        [(_, outcome)] = await h.wait_for_runs(thread, 1, timeout=30)
        await h.wait_for_text(thread, "Stopped by <@U0HUMAN01>")
        await h.slack.wait_for(lambda: not sleeping(), 20)  # the sandbox's process is gone
        await h.slack.wait_for(lambda: h.slack.session_status(CHANNEL, thread) == "active")

    assert outcome == "stopped" and len(h.model.requests) == 1
    assert "should not get here" not in h.texts(thread)
    [event] = [e["payload"]["event"] for e in h.slack.envelopes if e["envelope_id"] == envelope_id]
    [stream] = event["streaming_message_ts"]
    assert h.slack.streams[stream].stopped_by_user == "U0HUMAN01"
    assert history(h, thread)[0] == "processing" and history(h, thread)[-1] == "active"
    assert set(history(h, thread)) == {"processing", "active"}
    assert not h.slack.calls_to("assistant.threads.setStatus")  # the session shows the run
    assert not bot_warnings(caplog), bot_warnings(caplog)


@pytest.mark.parametrize("ui", ["agent", "classic"])
async def test_a_finished_run_leaves_its_session_active(
    ui: str, sandbox_root: Path, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="bot")
    async with running_bot(
        "local", one_step, sandbox_root, monkeypatch, SESSIONS, slack_ui=ui
    ) as h:
        message = await h.slack.post_user_message(CHANNEL, "hello", mention=True)
        thread = message["ts"]
        await h.wait_for_runs(thread, 1)
        await h.slack.wait_for(lambda: h.slack.session_status(CHANNEL, thread) == "active")
        # a stop pressed as the run ended finds nothing to stop: no word to anyone
        event = h.slack.session_stop_event(CHANNEL, thread, "U0HUMAN01")
        await h.slack.wait_for_ack(await h.slack.push_event(event))
        ignored = lambda: any("no run goes" in r.getMessage() for r in caplog.records)  # noqa: E731
        await h.slack.wait_for(ignored)

    assert history(h, thread) == ["processing", "active"]
    assert [c.error for c in h.slack.calls_to("agents.sessions.setStatus")] == [None] * (
        1 if ui == "agent" else 2
    )  # in the agent style the stream's stop says `active`
    if ui == "agent":
        [stop] = h.slack.calls_to("chat.stopStream")
        assert stop.args["session_status"] == "active"
        assert not h.slack.calls_to("assistant.threads.setStatus")
    assert not h.slack.ephemerals
    assert not bot_warnings(caplog), bot_warnings(caplog)


async def test_an_idle_teardown_closes_the_session(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot(
        "local", echo, sandbox_root, monkeypatch, SESSIONS, session_idle_timeout=1.5
    ) as h:
        message = await h.slack.post_user_message(CHANNEL, "hello", mention=True)
        thread = message["ts"]
        await h.wait_for_text(thread, "sandbox was shut down", timeout=20)
        await h.slack.wait_for(lambda: h.slack.session_status(CHANNEL, thread) == "closed")

    assert history(h, thread) == ["processing", "active", "closed"]


async def test_a_workspace_without_sessions_sees_the_thread_status(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", echo, sandbox_root, monkeypatch) as h:  # sessions off
        threads = []
        for question in ("one", "two"):
            message = await h.slack.post_user_message(CHANNEL, question, mention=True)
            threads.append(message["ts"])
            await h.wait_for_runs(message["ts"], 1)

    calls = h.slack.calls_to("agents.sessions.setStatus")
    assert [c.error for c in calls] == ["feature_disabled"]  # learnt once for the team
    assert not h.slack.sessions
    assert "session_status" not in str([c.args for c in h.slack.calls_to("chat.stopStream")])
    assert {s.thread_ts for s in h.slack.statuses} == set(threads)  # the status, as before


def napper(req: ModelRequest) -> Reply:
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "bash", "code": NAP})])
    return Reply([text("all done")])


async def test_a_stop_from_someone_who_may_not_is_refused(sandbox_root: Path, monkeypatch) -> None:
    """Refused as the Stop button refuses: told privately, and the run goes on to its
    answer (Slack stopped the stream: the answer comes after it)."""
    async with running_bot("local", napper, sandbox_root, monkeypatch, SESSIONS, **TEAM) as h:
        message = await h.slack.post_user_message(CHANNEL, "a short nap", mention=True)
        thread = message["ts"]
        await h.slack.wait_for(lambda: sleeping(NAP), 30)
        await h.slack.press_session_stop(CHANNEL, thread, user="U0HUMAN02")
        await h.slack.wait_for(lambda: told(h, "U0HUMAN02"))
        [(_, outcome)] = await h.wait_for_runs(thread, 1, timeout=30)
        await h.wait_for_text(thread, "all done")
        await h.slack.wait_for(lambda: h.slack.session_status(CHANNEL, thread) == "active")

    assert outcome == "finished"
    assert told(h, "U0HUMAN02") == ["Only <@U0HUMAN01> (who asked) can stop this run."]
    assert "Stopped" not in h.texts(thread)
    assert history(h, thread) == ["processing", "active"]


def test_the_manifest_subscribes_to_the_sessions_stop() -> None:
    """Without it Slack shows no stop button on the bot's sessions."""
    manifest = (CHECKOUT / "manifest.yml").read_text()
    events = manifest.split("bot_events:", 1)[1].split("interactivity:", 1)[0]
    listed = [line.split("#")[0].strip(" -") for line in events.splitlines()]
    assert "agent_session_stopped" in listed
    assert "agent_view:" in manifest  # the app is declared an agent


def says_hello(req: ModelRequest) -> Reply:
    return Reply([text("hello")])


async def test_a_burst_of_questions_is_seen_at_once_not_at_the_sessions_pace(
    sandbox_root: Path, monkeypatch
) -> None:
    """`agents.sessions.setStatus` is paced at Tier 3 (a burst of 9, then 0.75 a second):
    ten questions at once get their first sign (the session's status, or the thread's where
    the session's would wait) without queuing behind it. Before, each question's first sign
    was its session's status, so the tenth waited for the pace. (Each more question costs
    the test a second or two: the answers are posted at Slack's tiers too.)"""
    options = {**SESSIONS, "rate_limits": 1.0}  # Slack's own tiers, and the bot paced at them
    asked = 10
    async with running_bot("local", says_hello, sandbox_root, monkeypatch, options) as h:
        threads = [
            (await h.slack.post_user_message(CHANNEL, f"question {i}", mention=True))["ts"]
            for i in range(asked)
        ]
        signs = ("agents.sessions.setStatus", "assistant.threads.setStatus")

        def seen(thread: str) -> bool:
            return any(
                c.args.get("thread_ts") == thread and c.error is None
                for method in signs
                for c in h.slack.calls_to(method)
            )

        await h.slack.wait_for(lambda: all(seen(t) for t in threads), 60)
        session_calls = len(h.slack.calls_to("agents.sessions.setStatus"))
        # every session still gets its status, later
        await h.slack.wait_for(lambda: all(h.slack.session_status(CHANNEL, t) for t in threads), 60)
    assert session_calls < asked, session_calls  # signs came before the sessions' own pace
