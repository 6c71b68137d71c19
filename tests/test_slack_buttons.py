"""Who may press the bot's buttons (Stop, Continue, feedback), end to end through Slack:
anyone else is told privately, and nothing changes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.slack.policy import Policy
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack_harness import CHANNEL, Harness, bot_process, fake_world, running_bot
from tests.test_guard_rails import echo, spender, stops
from tests.test_slack_agent_ui import feedback_on

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
