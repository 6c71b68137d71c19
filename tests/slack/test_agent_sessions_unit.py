"""What the bot learns of a workspace's agent sessions from Slack's answers: "not here" is
kept for the team and logged once; a transient failure is not; Slack's warning about the
missing event subscription is logged once. Through SlackWeb and the real client, against
the fake Slack."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.threads import ThreadRef
from bot.slack.view.agent_sessions import AgentSessions
from bot.slack.web import SlackWeb
from tests.fakes.slack import FakeSlack

CHANNEL = "C0CHAN001"
METHOD = "agents.sessions.setStatus"

pytestmark = pytest.mark.usefixtures("no_proxy")


def sessions_on(slack: FakeSlack, api_url: str | None = None) -> AgentSessions:
    client = AsyncWebClient(token=slack.bot_token, base_url=api_url or slack.api_url)
    return AgentSessions(SlackWeb(client))


def thread(slack: FakeSlack) -> ThreadRef:
    return ThreadRef(slack.team_id, CHANNEL, slack.add_user_message(CHANNEL, "hi")["ts"])


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(agent_sessions=True) as fake:
        yield fake


@pytest.mark.parametrize("error", ["feature_disabled", "not_authorized", "not_allowed_token_type"])
async def test_not_here_is_learnt_once(slack: FakeSlack, error: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="bot")
    sessions, ref = sessions_on(slack), thread(slack)
    slack.fail_next(METHOD, status=200, error=error)
    assert not await sessions.set(ref, "processing")
    assert not await sessions.set(ref, "active")  # no second call

    assert len(slack.calls_to(METHOD)) == 1 and not sessions.available(ref.team)
    assert sessions.available("T0OTHER01")  # another workspace is asked for itself
    said = [r.getMessage() for r in caplog.records if "no agent sessions" in r.getMessage()]
    assert len(said) == 1 and error in said[0]


async def test_a_token_without_the_scope_is_not_here(caplog) -> None:
    async with FakeSlack(agent_sessions=True, scopes=("commands",)) as slack:
        sessions, ref = sessions_on(slack), thread(slack)
        assert not await sessions.set(ref, "processing")
        assert not sessions.available(ref.team)
        assert [c.error for c in slack.calls_to(METHOD)] == ["missing_scope"]


@pytest.mark.parametrize("error", ["internal_error", "ratelimited", "channel_not_found"])
async def test_a_passing_failure_is_not_learnt(slack: FakeSlack, error: str) -> None:
    sessions, ref = sessions_on(slack), thread(slack)
    slack.fail_next(METHOD, status=200, error=error)
    assert not await sessions.set(ref, "processing")
    assert sessions.available(ref.team) and sessions.status(ref) == ""
    assert await sessions.set(ref, "processing")

    assert sessions.status(ref) == "processing"
    assert slack.session_history(CHANNEL, ref.ts) == ["processing"]


async def test_a_network_failure_is_not_learnt(slack: FakeSlack) -> None:
    ref = thread(slack)
    nowhere = sessions_on(slack, "http://127.0.0.1:9/api/")  # nothing listens there
    assert not await nowhere.set(ref, "processing")
    assert nowhere.available(ref.team)


async def test_the_missing_subscription_is_logged_once(caplog) -> None:
    async with FakeSlack(agent_sessions=True, session_stop_subscribed=False) as slack:
        sessions, ref = sessions_on(slack), thread(slack)
        assert await sessions.set(ref, "processing")
        assert await sessions.set(ref, "active")

    said = [r for r in caplog.records if "agent_session_stopped" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
