"""The fake Slack's status and streaming methods, through the real slack_sdk client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

CHANNEL = "C0CHAN001"
TEAM = "T0FAKE001"
HUMAN = "U0HUMAN01"
GOOD = {"text": {"type": "plain_text", "text": "Good"}, "value": "good"}
BAD = {"text": {"type": "plain_text", "text": "Bad"}, "value": "bad"}
FEEDBACK = {
    "type": "context_actions",
    "elements": [
        {
            "type": "feedback_buttons",
            "action_id": "fb",
            "positive_button": GOOD,
            "negative_button": BAD,
        }
    ],
}


pytestmark = pytest.mark.usefixtures("no_proxy")  # loopback calls, straight


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(stream_lifetime_s=0.5) as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


async def thread(slack: FakeSlack) -> str:
    return slack.add_user_message(CHANNEL, "hi")["ts"]


async def error_of(call) -> str:
    with pytest.raises(SlackApiError) as err:
        await call
    return str(err.value.response["error"])


async def start(client: AsyncWebClient, ts: str, **extra) -> str:
    response = await client.chat_startStream(
        channel=CHANNEL, thread_ts=ts, recipient_user_id=HUMAN, recipient_team_id=TEAM, **extra
    )
    return str(response["ts"])


async def test_status_is_recorded_and_cleared_by_a_reply(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(slack)
    await client.assistant_threads_setStatus(
        channel_id=CHANNEL, thread_ts=ts, status="is analyzing…", loading_messages=["Step 1"]
    )
    assert slack.thread_status(CHANNEL, ts) == "is analyzing…"
    assert slack.statuses[-1].loading_messages == ("Step 1",)
    await client.chat_postMessage(channel=CHANNEL, thread_ts=ts, text="done")
    assert slack.status_history(CHANNEL, ts) == ["is analyzing…", ""]
    assert slack.statuses[-1].cleared_by_reply
    eleven = [str(i) for i in range(11)]
    assert (
        await error_of(
            client.assistant_threads_setStatus(
                channel_id=CHANNEL, thread_ts=ts, status="x", loading_messages=eleven
            )
        )
        == "invalid_arguments"
    )
    bad = client.assistant_threads_setStatus(channel_id=CHANNEL, thread_ts="1.2", status="x")
    assert await error_of(bad) == "invalid_thread_ts"


async def test_stream_builds_one_message_with_tasks_text_and_blocks(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(slack)
    chunks = [
        {"type": "plan_update", "title": "Plan"},
        {"type": "task_update", "id": "t1", "title": "Load", "status": "in_progress"},
    ]
    stream_ts = await start(client, ts, chunks=chunks, task_display_mode="plan")
    await client.chat_appendStream(
        channel=CHANNEL,
        ts=stream_ts,
        chunks=[
            {
                "type": "task_update",
                "id": "t1",
                "title": "Load",
                "status": "complete",
                "output": "795 rows",
            },
            {"type": "markdown_text", "text": "The answer"},
        ],
    )
    await client.chat_appendStream(channel=CHANNEL, ts=stream_ts, markdown_text=" is 42.")
    await client.chat_stopStream(channel=CHANNEL, ts=stream_ts, blocks=[FEEDBACK])
    message = slack.find_message(CHANNEL, stream_ts)
    assert message is not None and message["thread_ts"] == ts
    assert message["text"] == "The answer is 42."
    plan = message["blocks"][0]
    assert plan["title"] == "Plan" and plan["tasks"][0]["status"] == "complete"
    assert plan["tasks"][0]["title"] == "Load" and plan["tasks"][0]["output"] == "795 rows"
    assert message["blocks"][-1]["type"] == "context_actions"
    again = client.chat_appendStream(channel=CHANNEL, ts=stream_ts, markdown_text="more")
    assert await error_of(again) == "message_not_in_streaming_state"


async def test_stream_rules(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = await thread(slack)
    no_user = client.chat_startStream(channel=CHANNEL, thread_ts=ts, recipient_team_id=TEAM)
    assert await error_of(no_user) == "missing_recipient_user_id"
    no_team = client.chat_startStream(channel=CHANNEL, thread_ts=ts, recipient_user_id=HUMAN)
    assert await error_of(no_team) == "missing_recipient_team_id"
    bad_status = [{"type": "task_update", "id": "t", "title": "T", "status": "done"}]
    assert await error_of(start(client, ts, chunks=bad_status)) == "invalid_chunks"
    assert await error_of(start(client, ts, chunks=[{"type": "nope"}])) == "invalid_chunks"
    stream_ts = await start(client, ts, markdown_text="a" * 12_000)
    over = client.chat_appendStream(channel=CHANNEL, ts=stream_ts, markdown_text="b")
    assert await error_of(over) == "msg_too_long"
    too_long = start(client, ts, markdown_text="a" * 12_001)
    assert await error_of(too_long) == "msg_too_long"


async def test_every_task_update_carries_id_title_and_status(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    """As slack_sdk's TaskUpdateChunk has them required: a task's later updates too."""
    ts = await thread(slack)
    task = {"type": "task_update", "id": "t1", "title": "Load", "status": "in_progress"}
    stream_ts = await start(client, ts, chunks=[task])
    for missing in ("id", "title", "status"):
        later = {k: v for k, v in {**task, "status": "complete"}.items() if k != missing}
        call = client.chat_appendStream(channel=CHANNEL, ts=stream_ts, chunks=[later])
        assert await error_of(call) == "invalid_chunks", missing
        stop = client.chat_stopStream(channel=CHANNEL, ts=stream_ts, chunks=[later])
        assert await error_of(stop) == "invalid_chunks", missing
    for bad in ({"output": 42}, {"details": ["x"]}, {"title": "x" * 257}, {"sources": [{}]}):
        call = client.chat_appendStream(channel=CHANNEL, ts=stream_ts, chunks=[{**task, **bad}])
        assert await error_of(call) == "invalid_chunks", bad
    assert slack.streams[stream_ts].tasks["t1"]["status"] == "in_progress"
    done = {**task, "status": "complete", "output": "795 rows"}
    await client.chat_stopStream(channel=CHANNEL, ts=stream_ts, chunks=[done])
    assert slack.streams[stream_ts].tasks["t1"]["output"] == "795 rows"


async def test_stream_expires_after_its_lifetime(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = await thread(slack)
    stream_ts = await start(client, ts, markdown_text="first")
    await asyncio.sleep(0.6)
    late = client.chat_appendStream(channel=CHANNEL, ts=stream_ts, markdown_text=" second")
    assert await error_of(late) == "message_not_in_streaming_state"
    assert await error_of(client.chat_stopStream(channel=CHANNEL, ts=stream_ts)) == (
        "message_not_in_streaming_state"
    )
    await client.chat_update(channel=CHANNEL, ts=stream_ts, text="first second")
    assert slack.find_message(CHANNEL, stream_ts)["text"] == "first second"


async def test_a_workspace_without_the_feature_refuses() -> None:
    async with FakeSlack(ai_refusal="feature_not_enabled") as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        ts = await thread(slack)
        assert await error_of(start(client, ts)) == "feature_not_enabled"
        status = client.assistant_threads_setStatus(channel_id=CHANNEL, thread_ts=ts, status="x")
        assert await error_of(status) == "feature_not_enabled"


async def test_blocks_chunks_stay_and_stop_blocks_go_under_them(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(slack)
    button = {"type": "button", "action_id": "stop", "text": {"type": "plain_text", "text": "Stop"}}
    stop = {"type": "actions", "block_id": "run", "elements": [button]}
    stream_ts = await start(client, ts, chunks=[{"type": "blocks", "blocks": [stop]}])
    same_id = client.chat_stopStream(
        channel=CHANNEL, ts=stream_ts, blocks=[{**FEEDBACK, "block_id": "run"}]
    )
    assert await error_of(same_id) == "invalid_blocks"  # block_ids are the message's
    bad = {**FEEDBACK, "elements": [{"type": "feedback_buttons"}]}
    assert await error_of(client.chat_stopStream(channel=CHANNEL, ts=stream_ts, blocks=[bad])) == (
        "invalid_blocks"
    )
    await client.chat_stopStream(
        channel=CHANNEL, ts=stream_ts, markdown_text="Done.", blocks=[FEEDBACK]
    )
    blocks = slack.find_message(CHANNEL, stream_ts)["blocks"]
    assert [b["type"] for b in blocks] == ["actions", "markdown", "context_actions"]


async def test_suggested_prompts_and_titles(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = await thread(slack)
    prompt = {"title": "Explore", "message": "What is in this file?"}
    await client.assistant_threads_setSuggestedPrompts(channel_id="D0DM00001", prompts=[prompt])
    await client.assistant_threads_setTitle(channel_id=CHANNEL, thread_ts=ts, title="Growth")
    assert slack.prompts == [{"channel": "D0DM00001", "thread_ts": "", "prompts": [prompt]}]
    assert slack.titles == {(CHANNEL, ts): "Growth"}
    five = client.assistant_threads_setSuggestedPrompts(channel_id=CHANNEL, prompts=[prompt] * 5)
    assert await error_of(five) == "invalid_arguments"
    untitled = client.assistant_threads_setTitle(channel_id=CHANNEL, thread_ts="1.2", title="x")
    assert await error_of(untitled) == "invalid_thread_ts"


async def test_rate_tiers_answer_429_with_retry_after() -> None:
    async with FakeSlack(rate_limits=1.0) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        ts = await thread(slack)
        for _ in range(4):  # Tier 2: 20 a minute, bursts of 4
            await start(client, ts)
        with pytest.raises(SlackApiError) as err:
            await start(client, ts)
        assert err.value.response.status_code == 429
        assert err.value.response["error"] == "ratelimited"
        assert int(err.value.response.headers["Retry-After"]) == 3
        for _ in range(3):  # posts: one a second per channel, bursts of 3
            await client.chat_postMessage(channel=CHANNEL, text="hi")
        busy = client.chat_postMessage(channel=CHANNEL, text="hi")
        assert await error_of(busy) == "ratelimited"
        await client.chat_postMessage(channel="C0OTHER01", text="another channel is free")
        status = client.assistant_threads_setStatus(channel_id=CHANNEL, thread_ts=ts, status="x")
        assert (await status)["ok"]  # no published limit: not limited


async def test_a_streaming_message_cannot_be_edited(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(slack)
    stream_ts = await start(client, ts, markdown_text="half")
    edit = client.chat_update(channel=CHANNEL, ts=stream_ts, text="whole")
    assert await error_of(edit) == "streaming_state_conflict"
    assert slack.find_message(CHANNEL, stream_ts)["text"] == "half"
    await client.chat_stopStream(channel=CHANNEL, ts=stream_ts)
    await client.chat_update(channel=CHANNEL, ts=stream_ts, text="whole")
    assert slack.find_message(CHANNEL, stream_ts)["text"] == "whole"


async def test_slacks_own_stop_ends_the_stream(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = await thread(slack)
    stream_ts = await start(client, ts, markdown_text="so far")
    slack.press_stop(CHANNEL, stream_ts, user="U0HUMAN02")
    append = client.chat_appendStream(channel=CHANNEL, ts=stream_ts, markdown_text=" more")
    assert await error_of(append) == "stopped_by_user"
    stop = client.chat_stopStream(channel=CHANNEL, ts=stream_ts, markdown_text=" end")
    assert await error_of(stop) == "message_not_in_streaming_state"
    stream = slack.streams[stream_ts]
    assert stream.stopped_by_user == "U0HUMAN02" and stream.text == "so far"
    assert not slack.streaming(stream_ts)
    await client.chat_update(channel=CHANNEL, ts=stream_ts, text="edited after")  # no conflict
    with pytest.raises(LookupError):
        slack.press_stop(CHANNEL, stream_ts)  # already ended
