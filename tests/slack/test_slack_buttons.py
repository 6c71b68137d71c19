"""Who may press the bot's buttons (Stop, Continue, feedback), end to end through Slack:
anyone else is told privately, and nothing changes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bot.slack.listen.policy import Policy
from bot.slack.render import wording
from bot.store.sqlite import SqliteStore
from tests.e2e.test_guard_rails import echo, spender, stops
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack.test_slack_agent_ui import feedback_on
from tests.slack.test_slack_show_work import button_value
from tests.slack_harness import CHANNEL, Harness, bot_process, fake_world, running_bot

TEAM = {"allowed_users": "U0HUMAN01,U0HUMAN02"}  # U0STRANGER is not on the list


def sleeper(req: ModelRequest) -> Reply:
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 60"})])
    return Reply([text("should not get here")])


def told(h: Harness, user: str) -> list[str]:
    return [e.get("text", "") for e in h.slack.ephemerals if e["user"] == user]


def with_button(h: Harness, thread: str, action_id: str) -> list[dict]:
    return [m for m in h.bot_messages(thread) if action_id in str(m.get("blocks"))]


async def test_only_the_asker_stops_a_run(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot(
        "local", sleeper, sandbox_root, monkeypatch, slack_ui="classic", **TEAM
    ) as h:
        message = await h.slack.post_user_message(CHANNEL, "wait a minute", mention=True)
        thread = message["ts"]
        await h.wait_for_text(thread, "Step 1")
        [status] = with_button(h, thread, "stop_run")
        await h.slack.click_button(status, "stop_run", user="U0STRANGER")
        await h.slack.click_button(status, "stop_run", user="U0HUMAN02")
        await h.slack.wait_for(lambda: told(h, "U0STRANGER") and told(h, "U0HUMAN02"))
        assert h.runs(thread) == [("wait a minute", None)]  # still going
        await h.slack.click_button(status, "stop_run")
        await h.wait_for_text(thread, "Stopped by <@U0HUMAN01>")

    assert "not on it" in told(h, "U0STRANGER")[0]
    assert told(h, "U0HUMAN02") == ["Only <@U0HUMAN01> (who asked) can stop this run."]
    assert "should not get here" not in h.texts(thread)


def test_stop_by_anyone_still_needs_the_access_lists() -> None:
    policy = Policy(channels=frozenset({"C1"}), users=frozenset({"U1", "U2"}))
    assert policy.stop_refusal("C1", "U2", asker="U1")  # not the asker
    assert policy.stop_refusal("C1", "U1", asker="U1") is None
    anyone = Policy(channels=policy.channels, users=policy.users, stop_by_anyone=True)
    assert anyone.stop_refusal("C1", "U2", asker="U1") is None
    assert anyone.stop_refusal("C1", "U9", asker="U1")  # not on ALLOWED_USERS
    assert anyone.stop_refusal("C2", "U2", asker="U1")  # not in ALLOWED_CHANNELS


async def granted(h: Harness, thread: str) -> float:
    store = SqliteStore(h.settings.store_path)
    await store.open()
    try:
        session = await store.get_session(f"{h.slack.team_id}:{CHANNEL}:{thread}")
        return session.granted_usd if session else 0.0
    finally:
        await store.close()


async def test_continue_grants_once_per_button_across_a_restart(
    sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world(
        "local", spender, sandbox_root, monkeypatch, max_cost_usd_per_run=1.5, **TEAM
    ) as h:
        async with bot_process(h):
            message = await h.slack.post_user_message(CHANNEL, "spend", mention=True)
            thread = message["ts"]
            await h.wait_for_text(thread, "I stopped at this run's budget of $1.50")
            [note] = with_button(h, thread, "continue_run")
            await h.slack.click_button(note, "continue_run", user="U0STRANGER")
            await h.slack.wait_for(lambda: told(h, "U0STRANGER"))
            assert len(h.model.requests) == 2 and await granted(h, thread) == 0.0
            await asyncio.gather(
                *(h.slack.click_button(note, "continue_run", user="U0HUMAN02") for _ in range(2))
            )
            await h.slack.wait_for(lambda: len(stops(h, thread)) == 2 and told(h, "U0HUMAN02"))
            await h.wait_for_runs(thread, 2)
        async with bot_process(h):  # a restart: the mark is in the store
            await h.slack.click_button(note, "continue_run")
            await h.slack.wait_for(lambda: told(h, "U0HUMAN01"))
        runs = h.runs(thread)

    assert told(h, "U0HUMAN02") == ["That Continue was used already."]
    assert told(h, "U0HUMAN01") == ["That Continue was used already."]
    assert len(runs) == 2 and len(h.model.requests) == 4
    assert await granted(h, thread) == 1.5


async def test_feedback_is_recorded_only_from_people_who_may_use_the_bot(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", echo, sandbox_root, monkeypatch, **TEAM) as h:
        message = await h.slack.post_user_message(CHANNEL, "hi", mention=True)
        thread = message["ts"]
        await h.slack.wait_for(lambda: with_button(h, thread, "feedback"))
        [answer] = with_button(h, thread, "feedback")
        await h.slack.click_button(answer, "feedback", user="U0STRANGER", value="bad")
        await h.slack.wait_for(lambda: told(h, "U0STRANGER"))
        await h.slack.click_button(answer, "feedback", user="U0HUMAN02")
        ratings = await feedback_on(h, thread)  # the good click lands after the refused one

    assert [(r.user, r.value) for r in ratings] == [("U0HUMAN02", "good")]


def by_question(req: ModelRequest) -> Reply:
    """A question with "wait" in it sleeps in its step; any other runs a step, then answers."""
    if "wait" in json.dumps(req.messages[:1]):
        return sleeper(req)
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "python", "code": "print(6 * 7)"})])
    return Reply([text("It is 42.")])


async def test_a_button_naming_another_threads_run_is_refused(
    sandbox_root: Path, monkeypatch
) -> None:
    """A payload whose value names a run (or thread) other than the clicked message's:
    nothing is stopped, shown, uploaded or granted, and the clicker is told privately."""
    async with running_bot(
        "local", by_question, sandbox_root, monkeypatch, slack_ui="classic"
    ) as h:
        here = (await h.slack.post_user_message(CHANNEL, "six times seven?", mention=True))["ts"]
        await h.slack.wait_for(lambda: with_button(h, here, "show_work"), 30)
        [answer] = with_button(h, here, "show_work")
        there = (await h.slack.post_user_message(CHANNEL, "wait a minute", mention=True))["ts"]
        await h.wait_for_text(there, "Step 1")
        [status] = with_button(h, there, "stop_run")
        run_there = button_value(status, "stop_run")
        key_there = f"{h.slack.team_id}:{CHANNEL}:{there}"
        forged = {
            "stop_run": run_there,
            "show_work": run_there,
            "notebook": run_there,
            "continue_run": f"{key_there}|spent:forged",
        }
        for action, value in forged.items():
            await h.slack.click_button(answer, action, forged_value=value)
        await h.slack.wait_for(lambda: len(told(h, "U0HUMAN01")) == len(forged))
        assert h.runs(there) == [("wait a minute", None)]  # still going
        stopped_by = await run_stopped_by(h, run_there)
        await h.slack.click_button(status, "stop_run")  # its own button still stops it
        await h.wait_for_text(there, "Stopped by <@U0HUMAN01>")

    assert told(h, "U0HUMAN01") == [wording.NOT_THIS_THREAD] * len(forged)
    assert {e["thread_ts"] for e in h.slack.ephemerals} == {here}
    assert stopped_by is None
    assert not h.slack.views_opened and not h.slack.uploads
    assert await granted(h, there) == 0.0
    assert len(h.runs(there)) == 1


async def run_stopped_by(h: Harness, run_id: str) -> str | None:
    store = SqliteStore(h.settings.store_path)
    await store.open()
    try:
        run = await store.get_run(run_id)
        assert run is not None
        return run.stopped_by
    finally:
        await store.close()
