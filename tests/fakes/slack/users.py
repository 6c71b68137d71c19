"""The fake Slack's people: messages they post, slash commands and button clicks, pushed to
the bot as the events and envelopes Slack sends (slack-platform.md §3); and the events about
the bot's own messages (``echo_bot_events``), as a real channel sends them."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
import string
import time
import uuid
from collections.abc import Coroutine, Iterable
from typing import Any

from aiohttp import web

from tests.fakes.slack.blocks import find_element, rich_text
from tests.fakes.slack.common import (
    TEAM_DOMAIN,
    Json,
    Message,
    channel_type,
    random_id,
    ts_key,
)
from tests.fakes.slack.members import Membership
from tests.fakes.slack.outgoing import Outgoing

log = logging.getLogger(__name__)

VERIFICATION_TOKEN = "fake-verification-token"


class UserActions:
    """Mixed into FakeSlack: what users do, and the events it makes."""

    team_id: str
    app_id: str
    bot_user_id: str
    base_url: str
    echo_bot_events: bool
    membership: Membership
    messages: dict[str, list[Message]]
    responses: list[Json]
    outgoing: Outgoing
    _event_attempts: dict[str, int]
    _tasks: set[asyncio.Task[None]]
    # provided by FakeSlack, SocketMode and ViewFeatures
    issue_trigger: Any
    find_message: Any
    _store: Any
    _next_ts: Any
    _send_envelope: Any
    _envelope: Any

    # -- driving the bot, as users would

    def add_user_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0HUMAN01",
        thread_ts: str | None = None,
        files: Iterable[Json] = (),
    ) -> Message:
        """Store a user's message without telling the bot (earlier history, say)."""
        fields: Json = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": self._next_ts(),
            "team": self.team_id,
            "client_msg_id": str(uuid.uuid4()),
            "blocks": rich_text(text),
        }
        if thread_ts:
            fields["thread_ts"] = thread_ts
        if files := [copy.deepcopy(f) for f in files]:
            fields.update(files=files, upload=False, display_as_bot=False)
        return self._store(channel, fields)

    async def post_user_message(
        self,
        channel: str,
        text: str,
        *,
        user: str = "U0HUMAN01",
        thread_ts: str | None = None,
        files: Iterable[Json] = (),
        mention: bool = False,
        connection: int | None = None,
    ) -> Message:
        """Store a user's message and push the events Slack would push for it.

        A ``message`` event always (subtype ``file_share`` with files), and with
        ``mention`` (the text gets a ``<@bot>`` prefix) also an ``app_mention`` event;
        Slack sends no ``app_mention`` in DMs, and no event at all from a conversation the
        bot is not in. `connection`: the Socket Mode connection (by order of connecting)
        its events go to, else Slack's choice.
        """
        if mention:
            text = f"<@{self.bot_user_id}> {text}"
        message = self.add_user_message(channel, text, user=user, thread_ts=thread_ts, files=files)
        if channel not in self.membership:
            return message
        event = self._as_event(message, subtype="file_share" if "files" in message else None)
        await self.push_event(event, connection=connection)
        if mention and channel_type(channel) != "im":
            mention_event = {k: v for k, v in event.items() if k not in ("subtype", "channel_type")}
            await self.push_event({**mention_event, "type": "app_mention"}, connection=connection)
        return message

    async def push_event(
        self,
        event: Json,
        *,
        event_id: str | None = None,
        retry_attempt: int = 0,
        connection: int | None = None,
    ) -> str:
        """Push an ``events_api`` envelope; returns its envelope_id.

        Re-pushing an ``event_id`` is a redelivery: same event_id and event_time, a new
        envelope, and ``retry_attempt`` one above the last (unless given).
        """
        event = copy.deepcopy(event)
        event.setdefault("event_ts", event.get("ts") or self._next_ts())
        self._remember_pushed_message(event)
        event_id = event_id or f"Ev{random_id(10)}"
        if event_id in self._event_attempts and not retry_attempt:
            retry_attempt = self._event_attempts[event_id] + 1
        self._event_attempts[event_id] = max(retry_attempt, self._event_attempts.get(event_id, 0))
        body = self._event_body(event, event_id)
        envelope = self._envelope("events_api", body, accepts_response_payload=False)
        envelope.update(
            retry_attempt=retry_attempt, retry_reason="timeout" if retry_attempt else ""
        )
        return await self._send_envelope(envelope, connection)

    async def slash_command(
        self, command: str, text: str, *, channel: str = "C0CHAN001", user: str = "U0HUMAN01"
    ) -> str:
        """Push a ``slash_commands`` envelope; returns its envelope_id."""
        payload = {
            "token": VERIFICATION_TOKEN,
            "team_id": self.team_id,
            "team_domain": TEAM_DOMAIN,
            "channel_id": channel,
            "channel_name": self._channel_name(channel),
            "user_id": user,
            "user_name": user.lower(),
            "command": command if command.startswith("/") else f"/{command}",
            "text": text,
            "api_app_id": self.app_id,
            "is_enterprise_install": "false",
            "response_url": self._response_url_for("commands"),
            "trigger_id": self._trigger_id(),
        }
        envelope = self._envelope("slash_commands", payload, accepts_response_payload=True)
        return await self._send_envelope(envelope)

    async def click_button(
        self,
        message: Json,
        action_id: str,
        *,
        user: str = "U0HUMAN01",
        value: str | None = None,
        connection: int | None = None,
        trigger_age_s: float = 0.0,
        forged_value: str | None = None,
    ) -> str:
        """Push an ``interactive`` block_actions envelope for a button in ``message``.

        The value comes from the button; for ``feedback_buttons`` pass ``value`` to pick
        the negative one (the positive one is the default). The payload's trigger_id is
        fresh (views.py), or as if issued `trigger_age_s` ago. ``forged_value``: a payload
        no Slack client sends but anyone with the app's socket or a modified client could,
        the action carrying that value (and ``action_id`` even when the message has no
        such button); channel and message stay the clicked message's.
        """
        channel = self._channel_of(message)
        current = self.find_message(channel, message["ts"]) or message
        try:
            block_id, element = find_element(current, action_id)
        except LookupError:
            if forged_value is None:
                raise
            block_id, element = "forged", {"action_id": action_id, "type": "button"}
        if forged_value is not None:
            element = {**element, "value": forged_value}
        action = self._action(block_id, element, value)
        container: Json = {
            "type": "message",
            "message_ts": current["ts"],
            "channel_id": channel,
            "is_ephemeral": False,
        }
        if current.get("thread_ts"):
            container["thread_ts"] = current["thread_ts"]
        payload = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": self.team_id,
            },
            "api_app_id": self.app_id,
            "token": VERIFICATION_TOKEN,
            "container": container,
            "trigger_id": self._trigger_id(trigger_age_s),
            "team": {"id": self.team_id, "domain": TEAM_DOMAIN},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": self._channel_name(channel)},
            "message": copy.deepcopy(dict(current)),
            "state": {"values": {}},
            "response_url": self._response_url_for("actions"),
            "actions": [action],
        }
        envelope = self._envelope("interactive", payload, accepts_response_payload=False)
        return await self._send_envelope(envelope, connection)

    def _remember_pushed_message(self, event: Json) -> None:
        """A raw pushed user message joins the store, so the bot can reply or react to it."""
        channel, ts = event.get("channel"), event.get("ts")
        if event.get("type") not in ("message", "app_mention") or not channel or not ts:
            return
        if event.get("subtype") not in (None, "file_share", "thread_broadcast"):
            return
        if self.find_message(channel, ts) is None:
            drop = ("channel", "channel_type", "event_ts", "subtype")
            fields = {k: v for k, v in event.items() if k not in drop} | {"type": "message"}
            self._store(channel, copy.deepcopy(fields))

    # -- events and envelopes

    def _as_event(self, message: Message, *, subtype: str | None) -> Json:
        event = copy.deepcopy(dict(message))
        event.pop("metadata", None)
        if subtype:
            event["subtype"] = subtype
        event.update(
            channel=message.channel,
            event_ts=message["ts"],
            channel_type=channel_type(message.channel),
        )
        return event

    def _changed_event(self, channel: str, message: Message, previous: Json) -> Json:
        ts = self._next_ts()
        return {
            "type": "message",
            "subtype": "message_changed",
            "hidden": True,
            "channel": channel,
            "channel_type": channel_type(channel),
            "ts": ts,
            "event_ts": ts,
            "message": copy.deepcopy(dict(message)),
            "previous_message": previous,
        }

    def _echo(self, event: Json) -> None:
        """Push an event about the bot's own message, as Slack does, when enabled."""
        if self.echo_bot_events:
            self._spawn(self.push_event(event))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        async def run() -> None:
            try:
                await coro
            except (TimeoutError, ConnectionError) as err:
                log.warning("fake Slack could not push an event: %s", err)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _event_body(self, event: Json, event_id: str) -> Json:
        context = base64.b64encode(json.dumps({"et": event.get("type")}).encode()).decode()
        return {
            "token": VERIFICATION_TOKEN,
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "context_enterprise_id": None,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(ts_key(event["event_ts"])[0]) or int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{context}",
        }

    def _action(self, block_id: str, element: Json, value: str | None) -> Json:
        action: Json = {
            "action_id": element["action_id"],
            "block_id": block_id,
            "type": element.get("type", "button"),
            "action_ts": f"{time.time():.6f}",
        }
        if element.get("type") == "feedback_buttons":
            button = element["positive_button"]
            if value is not None and value == element["negative_button"].get("value"):
                button = element["negative_button"]
            action.update(text=button.get("text"), value=button.get("value"))
        else:
            action.update(text=element.get("text"), value=element.get("value", value))
            if element.get("style"):
                action["style"] = element["style"]
        return action

    def _channel_of(self, message: Json) -> str:
        if isinstance(message, Message):
            return message.channel
        for channel, stored in self.messages.items():
            if any(m["ts"] == message.get("ts") for m in stored):
                return channel
        raise LookupError(f"message {message.get('ts')} is not in the fake workspace")

    @staticmethod
    def _channel_name(channel: str) -> str:
        kind = channel_type(channel)
        return {"im": "directmessage", "group": "privategroup"}.get(kind, channel.lower())

    def _trigger_id(self, age_s: float = 0.0) -> str:
        return self.issue_trigger(age_s=age_s)  # views.py: good for views.open for 3 s

    def _response_url_for(self, kind: str) -> str:
        tail = f"{random_id(12, string.digits)}/{random_id(24)}"
        return f"{self.base_url}/{kind}/{self.team_id}/{tail}"

    async def _response_url(self, request: web.Request) -> web.Response:
        if request.content_type == "application/json":
            body = await request.json()
        else:
            body = dict(await request.post())
        self.responses.append(body)
        self.outgoing.note("response_url", body)
        return web.Response(text="ok", content_type="text/plain")
