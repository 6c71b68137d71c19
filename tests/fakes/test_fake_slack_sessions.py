"""The fake Slack's agent sessions (agents.sessions.*, chat.stopStream's session_status, the
session's stop button), through the real slack_sdk client and a plain WebSocket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack
from tests.fakes.test_fake_slack_socket import connect, frame

CHANNEL = "C0CHAN001"
TEAM = "T0FAKE001"
HUMAN = "U0HUMAN01"

pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(agent_sessions=True) as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


async def error_of(call) -> str:
    with pytest.raises(SlackApiError) as err:
        await call
    return str(err.value.response["error"])


def question(slack: FakeSlack) -> str:
    return slack.add_user_message(CHANNEL, "how many rows?")["ts"]


async def start(client: AsyncWebClient, ts: str) -> str:
    response = await client.chat_startStream(
        channel=CHANNEL, thread_ts=ts, recipient_user_id=HUMAN, recipient_team_id=TEAM,
        markdown_text="so far",
    )  # fmt: skip
    return str(response["ts"])


async def test_set_status_creates_the_session_and_keeps_its_history(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = question(slack)
    first = await client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=ts, status="processing", title="Rows"
    )
    again = await client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=ts, status="active", title="Not this one"
    )

    assert first["status"] == first["agent_status"] == "processing"
    assert first["title"] == again["title"] == "Rows"  # the title counts at creation only
    assert "warning" not in first.data
    assert slack.session_history(CHANNEL, ts) == ["processing", "active"]
    assert slack.session_status(CHANNEL, ts) == "active"
    assert slack.session_status(CHANNEL, "1.000001") == ""


async def test_set_status_is_checked(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = question(slack)
    set_status = client.agents_sessions_setStatus
    assert await error_of(set_status(channel_id=CHANNEL, thread_ts=ts, status="busy")) == (
        "invalid_status"
    )
    assert await error_of(set_status(channel_id=CHANNEL, status="active")) == "thread_ts_required"
    assert await error_of(set_status(channel_id="nope", thread_ts=ts, status="active")) == (
        "channel_not_found"
    )
    long = set_status(channel_id=CHANNEL, thread_ts=ts, status="active", title="x" * 201)
    assert await error_of(long) == "invalid_arguments"
    stranger = set_status(
        channel_id=CHANNEL, thread_ts=ts, status="active", initiator_user_id="bob"
    )
    assert await error_of(stranger) == "user_not_found"
    icon = set_status(channel_id=CHANNEL, thread_ts=ts, status="active", icon_emoji=":x:")
    assert await error_of(icon) == "missing_scope"
    slack.session_channels.add("C0SESSION1")
    in_session = set_status(channel_id="C0SESSION1", thread_ts=ts, status="active")
    assert await error_of(in_session) == "thread_ts_not_allowed"
    await set_status(channel_id="C0SESSION1", status="processing")
    slack.remove_bot("C0OUT0001")
    outside = set_status(channel_id="C0OUT0001", thread_ts=ts, status="active")
    assert await error_of(outside) == "not_authorized"
    form = client.api_call(
        "agents.sessions.setStatus",
        data={"channel_id": CHANNEL, "thread_ts": ts, "status": "active"},
    )
    assert await error_of(form) == "invalid_arguments"  # a JSON body only
    app_token = AsyncWebClient(token=slack.app_token, base_url=slack.api_url)
    assert await error_of(
        app_token.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="active")
    ) == "not_allowed_token_type"  # fmt: skip

    assert slack.session_history(CHANNEL, ts) == []
    assert slack.session_history("C0SESSION1", "") == ["processing"]


async def test_without_the_feature_or_the_scope() -> None:
    async with FakeSlack() as slack:  # agent_sessions off by default
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        ts = question(slack)
        calls = [
            client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="active"),
            client.agents_sessions_rename(channel_id=CHANNEL, thread_ts=ts, title="t"),
        ]
        assert [await error_of(c) for c in calls] == ["feature_disabled"] * 2
        stream = await start(client, ts)
        await client.chat_stopStream(channel=CHANNEL, ts=stream, session_status="closed")
        assert slack.sessions == {}  # a thread without a session gets none
    async with FakeSlack(agent_sessions=True, scopes=("commands",)) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        call = client.agents_sessions_setStatus(
            channel_id=CHANNEL, thread_ts="1.2", status="active"
        )
        assert await error_of(call) == "missing_scope"


async def test_a_warning_while_not_subscribed_to_the_stop() -> None:
    async with FakeSlack(agent_sessions=True, session_stop_subscribed=False) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        ts = question(slack)
        answer = await client.agents_sessions_setStatus(
            channel_id=CHANNEL, thread_ts=ts, status="processing"
        )
        assert answer["warning"] == "missing_agent_session_stopped_event_subscription"
        with pytest.raises(LookupError):  # no stop button to press
            await slack.press_session_stop(CHANNEL, ts)


async def test_rename(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = question(slack)
    rename = client.agents_sessions_rename
    assert await error_of(rename(channel_id=CHANNEL, thread_ts=ts, title="t")) == (
        "session_not_found"
    )
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="active")
    assert await error_of(rename(channel_id=CHANNEL, thread_ts=ts, title="")) == "invalid_name"
    assert await error_of(rename(channel_id=CHANNEL, thread_ts=ts, title="x" * 201)) == (
        "invalid_name"
    )
    assert await error_of(rename(channel_id=CHANNEL, title="t")) == "thread_ts_required"
    renamed = await rename(channel_id=CHANNEL, thread_ts=ts, title="Row counts")
    assert renamed["title"] == "Row counts" == slack.sessions[(CHANNEL, ts)].title


async def test_stop_stream_moves_the_session(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = question(slack)
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="processing")
    first = await start(client, ts)
    bad = client.chat_stopStream(channel=CHANNEL, ts=first, session_status="done")
    assert await error_of(bad) == "invalid_arguments"
    assert slack.streaming(first)  # a refused stop leaves the stream going
    await client.chat_stopStream(channel=CHANNEL, ts=first, session_status="suspended")
    second = await start(client, ts)
    await client.chat_stopStream(channel=CHANNEL, ts=second)  # default: active

    assert slack.session_history(CHANNEL, ts) == ["processing", "suspended", "active"]


async def test_pressing_the_sessions_stop(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = question(slack)
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="processing")
    stream = await start(client, ts)
    other = await start(client, question(slack))  # another thread's stream goes on
    async with aiohttp.ClientSession() as http, await connect(slack, http) as ws:
        assert (await frame(ws))["type"] == "hello"
        envelope_id = await slack.press_session_stop(CHANNEL, ts, user="U0HUMAN02")
        envelope = await frame(ws)
        await ws.send_str(json.dumps({"envelope_id": envelope_id}))
        await slack.wait_for_ack(envelope_id)
    append = client.chat_appendStream(channel=CHANNEL, ts=stream, markdown_text=" more")
    assert await error_of(append) == "stopped_by_user"
    stop = client.chat_stopStream(channel=CHANNEL, ts=stream, session_status="active")
    assert await error_of(stop) == "message_not_in_streaming_state"
    assert slack.session_status(CHANNEL, ts) == "processing"  # until the app moves it
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="active")
    with pytest.raises(LookupError):  # no stop button once it is not processing
        await slack.press_session_stop(CHANNEL, ts)

    body = envelope["payload"]
    assert envelope["envelope_id"] == envelope_id == slack.session_stops[0]
    assert body["type"] == "event_callback" and body["team_id"] == TEAM
    event = body["event"]
    assert {k: event[k] for k in ("type", "channel", "user", "thread_ts")} == {
        "type": "agent_session_stopped",
        "channel": CHANNEL,
        "user": "U0HUMAN02",
        "thread_ts": ts,
    }
    assert event["streaming_message_ts"] == [stream] and event["event_ts"]
    assert slack.streams[stream].stopped_by_user == "U0HUMAN02"
    assert slack.streaming(other)
    assert slack.session_history(CHANNEL, ts) == ["processing", "active"]


async def test_a_stop_with_no_stream_lists_none(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = question(slack)
    await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="processing")
    async with aiohttp.ClientSession() as http, await connect(slack, http) as ws:
        assert (await frame(ws))["type"] == "hello"
        await slack.press_session_stop(CHANNEL, ts)
        envelope = await frame(ws)
        await ws.send_str(json.dumps({"envelope_id": envelope["envelope_id"]}))
        await slack.wait_for_ack(envelope["envelope_id"])

    assert envelope["payload"]["event"]["streaming_message_ts"] == []
