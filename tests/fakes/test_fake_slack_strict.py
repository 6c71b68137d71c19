"""Where the fake Slack is as strict as Slack: conversations the bot is not in, uploads,
the CDN redirect of downloads, Slack Connect file stubs, the bot's own messages as events,
the shape of acks, and faults a test injected but never used."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack
from tests.slack_clients import CONNECT_TIMEOUT_S, api_error, socket_mode

CHANNEL, ELSEWHERE, DM = "C0CHAN001", "C0ELSE001", "D0DM00001"
HUMAN = "U0HUMAN01"

pytestmark = pytest.mark.usefixtures("no_proxy")  # loopback calls, straight


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(outside=[ELSEWHERE]) as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


# --------------------------------------------------------------------------- membership


async def test_a_conversation_without_the_bot_answers_not_in_channel(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    there = slack.add_user_message(ELSEWHERE, "hello")
    calls = [
        client.chat_postMessage(channel=ELSEWHERE, text="hi"),
        client.chat_postEphemeral(channel=ELSEWHERE, user=HUMAN, text="hi"),
        client.reactions_add(channel=ELSEWHERE, timestamp=there["ts"], name="eyes"),
        client.conversations_replies(channel=ELSEWHERE, ts=there["ts"]),
        client.files_upload_v2(channel=ELSEWHERE, content=b"a", filename="a.txt"),
        client.assistant_threads_setStatus(channel_id=ELSEWHERE, thread_ts=there["ts"], status="x"),
    ]
    errors = [(await api_error(call)).response["error"] for call in calls]
    in_dm = await client.chat_postMessage(channel=DM, text="a DM always has the bot")
    here = await client.chat_postMessage(channel=CHANNEL, text="here it is")
    slack.remove_bot(CHANNEL)
    removed = await api_error(client.chat_update(channel=CHANNEL, ts=here["ts"], text="x"))

    assert errors == ["not_in_channel"] * len(calls)
    assert in_dm["ok"] and removed.response["error"] == "not_in_channel"
    assert slack.messages[ELSEWHERE] == [there] and not slack.uploads


async def test_no_events_from_a_conversation_without_the_bot(slack: FakeSlack) -> None:
    async with socket_mode(slack) as (_, received):
        await slack.post_user_message(ELSEWHERE, "anyone?", mention=True)
        later = await slack.post_user_message(CHANNEL, "here", mention=True)
        await slack.wait_for(lambda: len(received) == 2)

    assert {r.payload["event"]["channel"] for r in received} == {CHANNEL}
    assert [r.payload["event"]["ts"] for r in received] == [later["ts"]] * 2
    assert len(slack.messages[ELSEWHERE]) == 1  # stored all the same


# --------------------------------------------------------------------------- uploads


async def upload_url(slack: FakeSlack, client: AsyncWebClient, sent: bytes, length: int) -> str:
    """A started external upload, its bytes sent; returns the file id."""
    started = await client.files_getUploadURLExternal(filename="r.csv", length=length)
    async with aiohttp.ClientSession() as http, http.post(started["upload_url"], data=sent):
        pass
    return str(started["file_id"])


async def test_complete_upload_wants_the_declared_length(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    short = await upload_url(slack, client, b"abc", 5)
    err = await api_error(
        client.files_completeUploadExternal(files=[{"id": short}], channel_id=CHANNEL)
    )
    exact = await upload_url(slack, client, b"abcde", 5)
    done = await client.files_completeUploadExternal(files=[{"id": exact}], channel_id=CHANNEL)

    assert err.response["error"] == "invalid_arguments"
    assert "uploaded 3 bytes, but length was 5" in err.response["response_metadata"]["messages"][0]
    assert done["files"][0]["id"] == exact and list(slack.uploads) == [exact]


async def test_complete_upload_wants_a_thread_parent(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    parent = slack.add_user_message(CHANNEL, "question")
    reply = slack.add_user_message(CHANNEL, "follow-up", thread_ts=parent["ts"])
    lone = slack.add_user_message(CHANNEL, "no replies yet")
    file_id = await upload_url(slack, client, b"a", 1)

    errors = [
        (await api_error(client.files_completeUploadExternal(
            files=[{"id": file_id}], channel_id=CHANNEL, thread_ts=ts
        ))).response["error"]
        for ts in (reply["ts"], "1767225600.000001")
    ]  # fmt: skip
    into_lone = await client.files_completeUploadExternal(
        files=[{"id": file_id}], channel_id=CHANNEL, thread_ts=lone["ts"]
    )

    assert errors == ["invalid_thread_ts", "invalid_thread_ts"]
    assert into_lone["ok"] and slack.uploads[file_id].thread_ts == lone["ts"]
    await slack.wait_for(lambda: slack.uploads[file_id].shared_ts)
    assert slack.thread(CHANNEL, lone["ts"])[-1]["files"][0]["id"] == file_id


# --------------------------------------------------------------------------- downloads


async def test_url_private_download_redirects_to_the_cdn(slack: FakeSlack) -> None:
    content = bytes(range(256)) * 1_000
    file = slack.add_file("data.bin", content, mimetype="application/octet-stream")
    auth = {"Authorization": f"Bearer {slack.bot_token}"}
    assert slack.cdn is not None

    async with aiohttp.ClientSession() as http:
        # aiohttp follows the 302 and, the origin being another, drops the token
        async with http.get(file["url_private_download"], headers=auth) as resp:
            assert [r.status for r in resp.history] == [302]
            assert (
                resp.url.host == "127.0.0.2" and "attachment" in resp.headers["Content-Disposition"]
            )
            assert await resp.read() == content
        assert slack.cdn.tokens_seen == []
        # A client that carries the token on to the CDN is seen doing it.
        async with http.get(
            file["url_private_download"], headers=auth, allow_redirects=False
        ) as resp:
            location = resp.headers["Location"]
        async with http.get(location, headers=auth) as resp:
            assert await resp.read() == content
        async with http.get(location.replace("/files-edge/", "/files-edge/x")) as resp:
            assert resp.status == 403  # an unsigned link

    assert location.startswith(slack.cdn.base_url)
    assert slack.cdn.tokens_seen == [f"Bearer {slack.bot_token}"]


async def test_slack_connect_stub_files_need_files_info(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    file = slack.add_file("shared.csv", b"a\n1\n")

    stub = slack.stub_of(file)
    info = await client.files_info(file=stub["id"])

    assert stub == {
        "id": file["id"],
        "created": file["created"],
        "timestamp": file["timestamp"],
        "user": file["user"],
        "file_access": "check_file_info",
    }
    assert info["file"] == file


async def test_the_bots_own_messages_come_back_as_events(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    async with socket_mode(slack) as (_, received):
        posted = await client.chat_postMessage(channel=CHANNEL, text="hello")
        await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="hello again")
        stream = await client.chat_startStream(
            channel=CHANNEL, thread_ts=posted["ts"], recipient_user_id=HUMAN,
            recipient_team_id=slack.team_id, markdown_text="part",
        )  # fmt: skip
        await client.chat_stopStream(channel=CHANNEL, ts=stream["ts"], markdown_text=" two")
        await slack.wait_for(lambda: len(slack.acks) == 4)

    own, changed, started, stopped = sorted(
        (r.payload["event"] for r in received), key=lambda e: e["event_ts"]
    )
    assert own["bot_id"] == slack.bot_id and "subtype" not in own
    assert changed["subtype"] == "message_changed"
    assert changed["message"]["text"] == "hello again"
    assert changed["previous_message"]["text"] == "hello"
    assert (started["ts"], started["bot_id"], started["thread_ts"]) == (
        stream["ts"],
        slack.bot_id,
        posted["ts"],
    )
    assert stopped["subtype"] == "message_changed" and stopped["message"]["text"] == "part two"


async def test_no_echo_when_turned_off() -> None:
    async with FakeSlack(echo_bot_events=False) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        async with socket_mode(slack) as (_, received):
            await client.chat_postMessage(channel=CHANNEL, text="quiet")
            envelope_id = await slack.push_event({"type": "app_home_opened", "user": HUMAN})
            await slack.wait_for_ack(envelope_id)
    assert [r.envelope_id for r in received] == [envelope_id]


# --------------------------------------------------------------------------- acks and faults


async def raw_socket(slack: FakeSlack, http: aiohttp.ClientSession):
    web = AsyncWebClient(base_url=slack.api_url)
    url = (await web.apps_connections_open(app_token=slack.app_token))["url"]
    ws = await http.ws_connect(url)
    await ws.receive_json(timeout=CONNECT_TIMEOUT_S)  # hello
    return ws


async def test_malformed_acks_are_recorded_and_fail_the_test() -> None:
    with pytest.raises(AssertionError, match=r"^fake Slack: ") as failed:
        async with FakeSlack() as slack, aiohttp.ClientSession() as http:
            ws = await raw_socket(slack, http)
            event = lambda: slack.push_event({"type": "app_home_opened", "user": HUMAN})  # noqa: E731
            command = lambda: slack.slash_command("/analyze", "x")  # noqa: E731
            frames = [
                {"envelope_id": await event(), "type": "ack"},  # acks carry no type
                {"envelope_id": await event(), "payload": {"text": "no"}},  # events take none
                {"envelope_id": await command(), "payload": "text"},  # a payload is an object
                {"envelope_id": "no-such-envelope"},
                ["not", "an", "object"],
            ]
            twice = await command()
            frames += [{"envelope_id": twice, "payload": {"text": "ok"}}, {"envelope_id": twice}]
            for frame in frames:
                await ws.send_str(json.dumps(frame))
            await ws.send_str("not json")
            await slack.wait_for(lambda: len(slack.protocol_errors) == 7)
            await ws.close()

    problems = [e.partition(": ")[0] for e in slack.protocol_errors]
    assert problems == [
        "an ack with fields an ack does not have ['type']",
        "a payload in the ack of a events_api envelope, which takes none",
        "an ack whose payload is not an object",
        "an ack for no envelope that was sent",
        "a frame that is not a JSON object",
        "a second ack of one envelope",
        "a frame that is not a JSON object",
    ]
    assert str(failed.value).count("; ") == 6


async def test_well_formed_acks_pass() -> None:
    async with FakeSlack() as slack, aiohttp.ClientSession() as http:
        ws = await raw_socket(slack, http)
        event = await slack.push_event({"type": "app_home_opened", "user": HUMAN})
        command = await slack.slash_command("/analyze", "x")
        await ws.send_str(json.dumps({"envelope_id": event}))
        await ws.send_str(json.dumps({"envelope_id": command, "payload": {"text": "ok"}}))
        await slack.wait_for_ack(command)
        await ws.close()
    assert slack.protocol_errors == [] and len(slack.acks) == 2


async def test_a_fault_never_used_fails_the_test() -> None:
    with pytest.raises(AssertionError, match=r"fault never used: reactions\.add: no_reaction"):
        async with FakeSlack() as slack:
            client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
            slack.fail_next("chat.postMessage")
            slack.fail_next("reactions.add", status=200, error="no_reaction")
            slack.fail_next("chat.update", optional=True)  # the test may not get there
            await api_error(client.chat_postMessage(channel=CHANNEL, text="hi"))
            assert slack.pending_faults() == [
                "reactions.add: no_reaction (HTTP 200)",
                "chat.update: ratelimited (HTTP 429)",
            ]
