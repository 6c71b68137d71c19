"""The fake Slack, exercised through the real slack_sdk clients and a minimal Bolt app."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import DEFAULT_SCOPES, FakeSlack
from tests.slack_clients import CONNECT_TIMEOUT_S, api_error, socket_mode

CHANNEL = "C0CHAN001"
HUMAN = "U0HUMAN01"
TS_RE = re.compile(r"^\d{10}\.\d{6}$")
ENV_TO_CLEAR = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "SLACK_CLIENT_ID",
    "SLACK_CLIENT_SECRET",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proxies would route 127.0.0.1 away; Slack OAuth variables switch Bolt's mode."""
    for name in ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def markdown(text: str) -> dict[str, Any]:
    return {"type": "markdown", "text": text}


def bolt_app(slack: FakeSlack) -> AsyncApp:
    return AsyncApp(client=AsyncWebClient(token=slack.bot_token, base_url=slack.api_url))


@contextlib.asynccontextmanager
async def running(slack: FakeSlack, app: AsyncApp) -> AsyncIterator[AsyncSocketModeHandler]:
    handler = AsyncSocketModeHandler(app, slack.app_token, web_client=app.client)
    try:
        await asyncio.wait_for(handler.connect_async(), CONNECT_TIMEOUT_S)
        yield handler
    finally:
        await handler.close_async()


# --------------------------------------------------------------------------- Web API basics


async def test_auth_test_answers_identity_and_scopes(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    resp = await client.auth_test(team_id=slack.team_id)

    assert (resp["user_id"], resp["bot_id"], resp["team_id"]) == (
        "U0BOT0001",
        "B0BOT0001",
        "T0FAKE001",
    )
    assert resp.headers["X-OAuth-Scopes"].split(",") == list(DEFAULT_SCOPES)
    assert resp.headers["Content-Type"].startswith("application/json")
    [call] = slack.calls
    assert call.method == "auth.test"
    assert call.args == {"team_id": "T0FAKE001"}  # the query string of an empty POST
    assert call.headers["authorization"] == "Bearer xoxb-test-token"
    assert (call.status, call.error) == (200, None)
    assert slack.method_counts() == {"auth.test": 1}


@pytest.mark.parametrize(
    ("token", "method", "error"),
    [
        ("xoxb-wrong", "auth.test", "invalid_auth"),
        (None, "auth.test", "not_authed"),
        ("xapp-1-A0FAKE001-1-test", "chat.postMessage", "not_allowed_token_type"),
        ("xoxb-test-token", "apps.connections.open", "not_allowed_token_type"),
        ("xapp-1-A0FAKE001-1-other", "apps.connections.open", "invalid_auth"),
    ],
)
async def test_tokens_are_checked(
    slack: FakeSlack, token: str | None, method: str, error: str
) -> None:
    client = AsyncWebClient(token=token, base_url=slack.api_url)

    err = await api_error(client.api_call(method, json={"channel": CHANNEL, "text": "hi"}))

    assert err.response.status_code == 200
    assert err.response["error"] == error
    assert slack.calls[0].error == error


async def test_unknown_method_and_missing_scope(client: AsyncWebClient) -> None:
    err = await api_error(client.api_call("nope.nothing"))
    assert err.response["error"] == "unknown_method"

    err = await api_error(client.users_info(user=HUMAN))  # users:read is not granted
    assert (err.response["error"], err.response["needed"]) == ("missing_scope", "users:read")


async def test_users_info_with_users_read() -> None:
    async with FakeSlack(scopes=(*DEFAULT_SCOPES, "users:read")) as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        me = await client.users_info(user=slack.bot_user_id)
        human = await client.users_info(user=HUMAN)
        err = await api_error(client.users_info(user="nobody"))

    assert me["user"]["is_bot"] is True
    assert (human["user"]["id"], human["user"]["is_bot"]) == (HUMAN, False)
    assert err.response["error"] == "user_not_found"


# --------------------------------------------------------------------------- messages


async def test_post_update_delete_keep_thread_and_edit_history(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    parent = slack.add_user_message(CHANNEL, "how many rows?")

    posted = await client.chat_postMessage(
        channel=CHANNEL, thread_ts=parent["ts"], text="Working…", blocks=[section("Working…")]
    )
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="Step 1 of 2")
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="42 rows", blocks=[])

    assert TS_RE.match(posted["ts"]) and posted["ts"] > parent["ts"]
    assert posted["message"]["bot_id"] == slack.bot_id
    assert posted["message"]["user"] == slack.bot_user_id
    reply = slack.find_message(CHANNEL, posted["ts"])
    assert reply is not None
    assert [v["text"] for v in reply.versions] == ["Working…", "Step 1 of 2", "42 rows"]
    assert reply.history[1]["blocks"][0]["block_id"]  # kept by the text-only update, with an id
    assert "blocks" not in reply  # an empty array removes them
    assert reply["edited"]["user"] == slack.bot_user_id
    assert slack.thread(CHANNEL, parent["ts"]) == [parent, reply]
    assert parent["reply_count"] == 1 and reply["parent_user_id"] == HUMAN

    await client.chat_delete(channel=CHANNEL, ts=posted["ts"])
    assert slack.thread(CHANNEL, parent["ts"]) == [parent]
    assert parent["reply_count"] == 0


@pytest.mark.filterwarnings("ignore::UserWarning")  # the SDK warns about a missing text
@pytest.mark.parametrize(
    ("content", "error"),
    [
        ({}, "no_text"),
        ({"text": "hi", "markdown_text": "**hi**"}, "markdown_text_conflict"),
        ({"text": "hi", "blocks": [{"type": "divider"}] * 51}, "invalid_blocks"),
        ({"text": "hi", "blocks": [section("x" * 3001)]}, "invalid_blocks"),
        ({"blocks": [markdown("x" * 7000), markdown("y" * 5001)]}, "msg_blocks_too_long"),
        ({"text": "x" * 40_001}, "msg_too_long"),
        ({"markdown_text": "x" * 12_001}, "msg_too_long"),
    ],
)
async def test_post_message_enforces_content_rules(
    slack: FakeSlack, client: AsyncWebClient, content: dict[str, Any], error: str
) -> None:
    err = await api_error(client.chat_postMessage(channel=CHANNEL, **content))

    assert err.response["error"] == error
    assert CHANNEL not in slack.messages
    if error == "invalid_blocks":
        assert err.response["response_metadata"]["messages"][0].startswith("[ERROR]")


@pytest.mark.filterwarnings("ignore::UserWarning")  # markdown blocks without a text
async def test_content_at_the_limits_is_accepted(slack: FakeSlack, client: AsyncWebClient) -> None:
    await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[{"type": "divider"}] * 50)
    await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[section("x" * 3000)])
    await client.chat_postMessage(channel=CHANNEL, blocks=[markdown("x" * 6000)] * 2)
    md = await client.chat_postMessage(channel=CHANNEL, markdown_text="**" + "x" * 11_996 + "**")

    assert len(slack.messages[CHANNEL]) == 4
    assert md["message"]["blocks"][0]["type"] == "markdown"


async def test_update_errors(slack: FakeSlack, client: AsyncWebClient) -> None:
    human = slack.add_user_message(CHANNEL, "hi")
    posted = await client.chat_postMessage(channel=CHANNEL, text="ok")

    missing = await api_error(client.chat_update(channel=CHANNEL, ts="1.000001", text="x"))
    not_mine = await api_error(client.chat_update(channel=CHANNEL, ts=human["ts"], text="x"))
    too_big = await api_error(
        client.chat_update(channel=CHANNEL, ts=posted["ts"], text="x", blocks=[section("x" * 3001)])
    )

    assert missing.response["error"] == "message_not_found"
    assert not_mine.response["error"] == "cant_update_message"
    assert too_big.response["error"] == "invalid_blocks"
    message = slack.find_message(CHANNEL, posted["ts"])
    assert message is not None and message.history == []


async def test_ephemeral_and_reactions(slack: FakeSlack, client: AsyncWebClient) -> None:
    message = slack.add_user_message(CHANNEL, "hi")

    ephemeral = await client.chat_postEphemeral(channel=CHANNEL, user=HUMAN, text="only you")
    await client.reactions_add(channel=CHANNEL, timestamp=message["ts"], name="eyes")
    again = await api_error(
        client.reactions_add(channel=CHANNEL, timestamp=message["ts"], name="eyes")
    )

    assert TS_RE.match(ephemeral["message_ts"])
    assert slack.ephemerals == [
        {
            "channel": CHANNEL,
            "user": HUMAN,
            "message_ts": ephemeral["message_ts"],
            "text": "only you",
        }
    ]
    assert again.response["error"] == "already_reacted"
    assert slack.reactions == [(CHANNEL, message["ts"], "eyes")]
    assert message["reactions"] == [{"name": "eyes", "users": [slack.bot_user_id], "count": 1}]

    await client.reactions_remove(channel=CHANNEL, timestamp=message["ts"], name="eyes")
    gone = await api_error(
        client.reactions_remove(channel=CHANNEL, timestamp=message["ts"], name="eyes")
    )
    lost = await api_error(client.reactions_add(channel=CHANNEL, timestamp="1.000001", name="eyes"))

    assert slack.reactions == [] and "reactions" not in message
    assert gone.response["error"] == "no_reaction"
    assert lost.response["error"] == "message_not_found"


async def test_conversations_replies(slack: FakeSlack, client: AsyncWebClient) -> None:
    parent = slack.add_user_message(CHANNEL, "question")
    meta = {"event_type": "ctx", "event_payload": {"k": 1}}
    first = await client.chat_postMessage(
        channel=CHANNEL, thread_ts=parent["ts"], text="a", metadata=meta
    )
    slack.add_user_message(CHANNEL, "follow-up", thread_ts=parent["ts"])
    await client.chat_postMessage(channel=CHANNEL, thread_ts=parent["ts"], text="b")

    whole = await client.conversations_replies(channel=CHANNEL, ts=parent["ts"])
    page1 = await client.conversations_replies(
        channel=CHANNEL, ts=first["ts"], include_all_metadata=True, limit=2
    )
    page2 = await client.conversations_replies(
        channel=CHANNEL, ts=parent["ts"], cursor=page1["response_metadata"]["next_cursor"], limit=2
    )
    newer = await client.conversations_replies(channel=CHANNEL, ts=parent["ts"], oldest=first["ts"])
    missing = await api_error(client.conversations_replies(channel=CHANNEL, ts="1.000001"))

    assert [m["text"] for m in whole["messages"]] == ["question", "a", "follow-up", "b"]
    assert whole["has_more"] is False and "metadata" not in whole["messages"][1]
    assert whole["messages"][0]["reply_count"] == 3
    assert page1["has_more"] is True and page1["messages"][1]["metadata"] == meta
    assert [m["text"] for m in page2["messages"]] == ["follow-up", "b"]
    assert [m["text"] for m in newer["messages"]] == ["question", "follow-up", "b"]
    assert missing.response["error"] == "thread_not_found"


# --------------------------------------------------------------------------- files and limits


async def test_files_upload_v2_shares_into_the_thread(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    parent = slack.add_user_message(CHANNEL, "plot it")

    resp = await client.files_upload_v2(
        channel=CHANNEL,
        thread_ts=parent["ts"],
        content=b"a,b\n1,2\n",
        filename="result.csv",
        title="Result",
        initial_comment="Here you go",
    )

    file_id = resp["file"]["id"]
    assert resp["files"] == [{"id": file_id, "title": "Result"}]
    assert slack.method_counts() == {
        "files.getUploadURLExternal": 1,
        "files.completeUploadExternal": 1,
    }
    upload = slack.uploads[file_id]
    assert (upload.filename, upload.title, upload.content) == (
        "result.csv",
        "Result",
        b"a,b\n1,2\n",
    )
    assert (upload.channel_id, upload.thread_ts, upload.initial_comment) == (
        CHANNEL,
        parent["ts"],
        "Here you go",
    )
    assert "ts" not in resp.data and not upload.shared_ts  # shared a moment later
    assert slack.shares_pending() == 1
    assert not slack.thread(CHANNEL, parent["ts"])[-1].get("files")
    await slack.wait_for(lambda: upload.shared_ts)
    share = slack.thread(CHANNEL, parent["ts"])[-1]
    assert share["ts"] == upload.shared_ts
    assert share["bot_id"] == slack.bot_id and share["text"] == "Here you go"
    assert [f["id"] for f in share["files"]] == [file_id]

    info = await client.files_info(file=file_id)
    assert (info["file"]["name"], info["file"]["mimetype"], info["file"]["size"]) == (
        "result.csv",
        "text/csv",
        8,
    )
    missing = await api_error(client.files_info(file="F0NOPE"))
    assert missing.response["error"] == "file_not_found"


async def test_upload_url_takes_raw_or_multipart_bytes(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    raw = await client.files_getUploadURLExternal(filename="a.txt", length=3)
    multi = await client.files_getUploadURLExternal(filename="b.txt", length=3)

    early = await api_error(
        client.files_completeUploadExternal(files=[{"id": raw["file_id"]}], channel_id=CHANNEL)
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(raw["upload_url"], data=b"abc") as resp:  # no token, as the SDK
            assert (resp.status, await resp.text()) == (200, "OK - 3")
        form = aiohttp.FormData()
        form.add_field("file", b"xyz", filename="b.txt")
        async with http.post(multi["upload_url"], data=form) as resp:
            assert resp.status == 200
    done = await client.files_completeUploadExternal(
        files=[{"id": raw["file_id"]}, {"id": multi["file_id"], "title": "B"}]
    )

    assert raw["upload_url"].startswith(slack.base_url)
    assert early.response["error"] == "file_not_found"
    assert done["files"] == [
        {"id": raw["file_id"], "title": "a.txt"},
        {"id": multi["file_id"], "title": "B"},
    ]
    assert [u.content for u in slack.uploads.values()] == [b"abc", b"xyz"]
    assert (
        slack.shares_pending() == 0 and CHANNEL not in slack.messages
    )  # no channel: uploaded but not shared


async def test_fail_next_answers_429_with_retry_after(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.fail_next("chat.postMessage")
    slack.fail_next("reactions.add", status=200, error="too_many_reactions")

    limited = await api_error(client.chat_postMessage(channel=CHANNEL, text="hi"))
    posted = await client.chat_postMessage(channel=CHANNEL, text="hi")
    refused = await api_error(
        client.reactions_add(channel=CHANNEL, timestamp=posted["ts"], name="x")
    )

    assert limited.response.status_code == 429
    assert limited.response.headers["Retry-After"] == "1"
    assert limited.response["error"] == "ratelimited"
    assert [c.status for c in slack.calls_to("chat.postMessage")] == [429, 200]
    assert (refused.response.status_code, refused.response["error"]) == (200, "too_many_reactions")


async def test_downloads_need_the_bot_token(slack: FakeSlack) -> None:
    content = bytes(range(256)) * 12_000  # 3 MB, several chunks
    file = slack.add_file(
        "big.bin", content, mimetype="application/octet-stream", filetype="binary"
    )
    auth = {"Authorization": f"Bearer {slack.bot_token}"}

    async with aiohttp.ClientSession() as http:
        async with http.get(file["url_private"], headers=auth) as resp:
            assert (resp.status, resp.content_type) == (200, "application/octet-stream")
            assert resp.headers["Transfer-Encoding"] == "chunked"
            assert "inline" in resp.headers["Content-Disposition"]
            assert await resp.read() == content
        async with http.get(file["url_private"]) as resp:
            assert (resp.status, resp.content_type) == (200, "text/html")
            assert "Sign in" in await resp.text()
        bad = {"Authorization": "Bearer xoxb-wrong"}
        async with http.get(file["url_private_download"], headers=bad) as resp:
            assert (resp.status, resp.content_type, resp.history) == (200, "text/html", ())

    assert slack.downloads == [(file["id"], True), (file["id"], False), (file["id"], False)]
    assert slack.cdn is not None and slack.cdn.requests == []


# --------------------------------------------------------------------------- Socket Mode


async def test_link_checks_single_use_tickets_and_says_hello(slack: FakeSlack) -> None:
    web = AsyncWebClient(base_url=slack.api_url)
    url = (await web.apps_connections_open(app_token=slack.app_token))["url"]
    other = (await web.apps_connections_open(app_token=slack.app_token))["url"]

    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, autoping=False) as ws:
            hello = await asyncio.wait_for(ws.receive_json(), CONNECT_TIMEOUT_S)
            await ws.ping(b"sdk-ping-pong:1")
            pong = await asyncio.wait_for(ws.receive(), CONNECT_TIMEOUT_S)
        for reused in (url, url.replace("ticket=", "ticket=x")):
            with pytest.raises(aiohttp.WSServerHandshakeError) as err:
                await http.ws_connect(reused)
            assert err.value.status == 401

    assert url.startswith(slack.base_url.replace("http", "ws")) and url != other
    assert hello["type"] == "hello" and hello["connection_info"]["app_id"] == "A0FAKE001"
    assert (pong.type, pong.data) == (aiohttp.WSMsgType.PONG, b"sdk-ping-pong:1")
    assert slack.connections == 1


async def test_socket_mode_client_receives_and_acks(slack: FakeSlack) -> None:
    event = {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": HUMAN,
        "text": "<@U0BOT0001> hi",
        "ts": "1767225600.000200",
    }
    async with socket_mode(slack) as (_, received):
        envelope_id = await slack.push_event(event, event_id="Ev0TEST0001")
        ack = await slack.wait_for_ack(envelope_id)
        again = await slack.push_event(event, event_id="Ev0TEST0001")
        await slack.wait_for_ack(again)

    [opened] = slack.calls_to("apps.connections.open")
    assert opened.headers["authorization"] == f"Bearer {slack.app_token}"
    assert slack.connections == 1
    assert ack == {"envelope_id": envelope_id}
    first, redelivery = received
    assert (first.type, first.envelope_id, first.accepts_response_payload) == (
        "events_api",
        envelope_id,
        False,
    )
    assert (first.retry_attempt, first.retry_reason) == (0, "")
    body = first.payload
    assert (body["type"], body["event_id"], body["api_app_id"]) == (
        "event_callback",
        "Ev0TEST0001",
        "A0FAKE001",
    )
    assert body["authorizations"][0]["user_id"] == slack.bot_user_id
    assert body["event"]["event_ts"] == event["ts"]
    assert (redelivery.retry_attempt, redelivery.retry_reason) == (1, "timeout")
    assert redelivery.payload["event_id"] == "Ev0TEST0001" and redelivery.envelope_id != envelope_id
    assert slack.find_message(CHANNEL, event["ts"]) is not None  # the bot can reply to it


async def test_disconnect_makes_the_client_reconnect(slack: FakeSlack) -> None:
    async with socket_mode(slack) as (_, received):
        await slack.disconnect()
        await slack.wait_for(lambda: slack.connections == 2, timeout=CONNECT_TIMEOUT_S)
        envelope_id = await slack.push_event({"type": "app_home_opened", "user": HUMAN})
        await slack.wait_for_ack(envelope_id)

    assert len(slack.calls_to("apps.connections.open")) == 2
    assert [r.envelope_id for r in received] == [envelope_id]


async def test_push_without_a_connection_times_out() -> None:
    async with FakeSlack(connect_wait_s=0.1) as slack:
        with pytest.raises(TimeoutError, match="no Socket Mode connection"):
            await slack.push_event({"type": "app_home_opened", "user": HUMAN})


async def test_user_messages_push_message_and_app_mention_events(slack: FakeSlack) -> None:
    parent = slack.add_user_message(CHANNEL, "earlier", user="U0OTHER01")
    file = slack.add_file("data.csv", b"a\n1\n")

    async with socket_mode(slack) as (_, received):
        message = await slack.post_user_message(
            CHANNEL, "analyse this", thread_ts=parent["ts"], files=[file], mention=True
        )
        await slack.post_user_message("D0DM00001", "hi there", mention=True)
        await slack.wait_for(lambda: len(slack.acks) == 3)

    shared, mention, direct = (r.payload["event"] for r in received)
    assert shared["type"] == "message" and shared["subtype"] == "file_share"
    assert shared["files"][0]["url_private_download"] == file["url_private_download"]
    assert (shared["thread_ts"], shared["parent_user_id"]) == (parent["ts"], "U0OTHER01")
    assert mention["type"] == "app_mention" and "subtype" not in mention
    assert mention["text"] == "<@U0BOT0001> analyse this" == message["text"]
    assert mention["files"][0]["id"] == file["id"] and mention["ts"] == message["ts"]
    assert mention["blocks"][0]["elements"][0]["elements"][0] == {
        "type": "user",
        "user_id": "U0BOT0001",
    }
    assert (direct["type"], direct["channel_type"]) == ("message", "im")  # no app_mention in DMs


# --------------------------------------------------------------------------- Bolt


async def test_bolt_app_mention_reply_in_thread(slack: FakeSlack) -> None:
    app = bolt_app(slack)

    @app.event("app_mention")
    async def on_mention(event: dict[str, Any], say: Any) -> None:
        await say(
            text=f"you said: {event['text']}", thread_ts=event.get("thread_ts") or event["ts"]
        )

    @app.event("message")
    async def on_message() -> None:
        pass

    async with running(slack, app):
        message = await slack.post_user_message(CHANNEL, "hello", mention=True)
        await slack.wait_for(lambda: len(slack.envelopes) == 3)  # the reply's own event too
        for envelope in slack.envelopes:
            await slack.wait_for_ack(envelope["envelope_id"])

    [_, reply] = slack.thread(CHANNEL, message["ts"])  # Bolt dropped the bot's own message
    assert reply["text"] == "you said: <@U0BOT0001> hello"
    assert (reply["thread_ts"], reply["bot_id"]) == (message["ts"], slack.bot_id)
    events = [e["payload"]["event"] for e in slack.envelopes]
    assert [e["type"] for e in events] == ["message", "app_mention", "message"]
    assert (events[2]["ts"], events[2]["bot_id"]) == (reply["ts"], slack.bot_id)
    assert slack.calls_to("auth.test")  # Bolt checks the token lazily
    assert slack.calls_to("chat.postMessage")[0].args["team_id"] == slack.team_id


async def test_bolt_slash_command_ack_payload_and_respond(slack: FakeSlack) -> None:
    app = bolt_app(slack)

    @app.command("/ask")
    async def ask(ack: Any, command: dict[str, Any], respond: Any) -> None:
        await ack(text=f"Working on: {command['text']}")
        await respond(text="done", response_type="in_channel")

    async with running(slack, app):
        envelope_id = await slack.slash_command("/ask", "how many rows?")
        ack = await slack.wait_for_ack(envelope_id)
        await slack.wait_for(lambda: slack.responses)

    assert ack["payload"] == {"text": "Working on: how many rows?"}
    assert slack.envelopes[0]["accepts_response_payload"] is True
    assert slack.responses == [{"text": "done", "response_type": "in_channel"}]


async def test_bolt_button_click_reaches_the_action_handler(slack: FakeSlack) -> None:
    app = bolt_app(slack)
    clicks: list[tuple[str, str, str]] = []

    @app.action("rerun")
    @app.action("feedback")
    async def on_click(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        clicks.append((action["value"], body["user"]["id"], body["container"]["message_ts"]))

    rerun = {
        "type": "button",
        "action_id": "rerun",
        "text": {"type": "plain_text", "text": "Re-run"},
        "value": "42",
    }
    feedback = {
        "type": "feedback_buttons",
        "action_id": "feedback",
        "positive_button": {"text": {"type": "plain_text", "text": "Good"}, "value": "good"},
        "negative_button": {"text": {"type": "plain_text", "text": "Bad"}, "value": "bad"},
    }
    blocks = [
        {"type": "actions", "elements": [rerun]},
        {"type": "context_actions", "elements": [feedback]},
    ]
    async with running(slack, app):
        posted = await app.client.chat_postMessage(channel=CHANNEL, text="Result", blocks=blocks)
        message = slack.find_message(CHANNEL, posted["ts"])
        assert message is not None
        for envelope_id in (
            await slack.click_button(message, "rerun"),
            await slack.click_button(message, "feedback", value="bad"),
        ):
            await slack.wait_for_ack(envelope_id)
        await slack.wait_for(lambda: len(clicks) == 2)

    assert sorted(clicks) == [("42", HUMAN, posted["ts"]), ("bad", HUMAN, posted["ts"])]
    clicked = [e for e in slack.envelopes if e["type"] == "interactive"]
    assert [e["payload"]["type"] for e in clicked] == ["block_actions", "block_actions"]
