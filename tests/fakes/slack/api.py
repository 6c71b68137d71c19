"""A fake Slack workspace for end-to-end tests: Web API, Socket Mode, files and response URLs.

One aiohttp server on 127.0.0.1 serves what the real ``slack_sdk`` / Bolt clients touch
(slack-platform.md §10): ``/api/<method>``, the Socket Mode WebSocket at ``/link``
(socket.py), upload URLs, ``url_private*`` downloads (files.py; the CDN they
redirect to is a second server, on 127.0.0.2) and ``response_url`` sinks. The workspace
keeps the state the bot's calls leave behind (messages with their edit history, reactions,
uploads) and tests drive the bot as users would (users.py)::

    async with FakeSlack() as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        app = AsyncApp(client=client)
        handler = AsyncSocketModeHandler(app, slack.app_token, web_client=app.client)
        await asyncio.wait_for(handler.connect_async(), 5)
        msg = await slack.post_user_message("C0CHAN001", "how many rows?", mention=True)
        await slack.wait_for(lambda: len(slack.thread("C0CHAN001", msg["ts"])) > 1)

Where the sources are vague the fake picks the stricter reading: WebSocket tickets are
single-use; all markdown blocks of a message share one 12,000-character budget
(``msg_blocks_too_long``) and an over-long ``markdown_text`` is ``msg_too_long``; scopes
are enforced (``users.info`` needs ``users:read``, which the default scopes lack); a
missing token is ``not_authed`` and a wrong one ``invalid_auth``; the bot is in every
conversation unless a test takes it out (members.py: ``not_in_channel``, and no events
from there); file downloads redirect to a CDN on another host (cdn.py); acks are
shape-checked (socket.py). The bot's own posts, edits and deletions come back to it
as events, as they do in a real channel (``echo_bot_events``, on by default). An upload's
share lands in its thread a moment after ``files.completeUploadExternal`` answers
(``share_delay_s``), as Slack shares files asynchronously (files.py). Agent sessions
(sessions.py) are off unless a test turns them on (``agent_sessions=True``), as in a
workspace without the feature.

Slack's data blocks (``table``, ``data_table``, ``data_visualization``; surfaces.py) have
switches where the sources disagree: ``refuse_blocks`` (block types a workspace does not
have yet: ``invalid_blocks``), ``data_table_revision`` ("A": 101 rows and 10,000
characters, "B": 201 and 20,000), ``chart_max_series`` (6, or 12), ``stream_data_blocks``
(the stream methods refuse data blocks unless True) and ``surface_rules`` for the finer
ones (``SurfaceRules``; the keywords above override its fields). ``blocks.validate`` runs
the same checks (validate.py). ``views.open`` opens modals (views.py): a trigger_id is good
once, for 3 seconds after the interaction that carried it (``click_button`` and slash
commands carry fresh ones), and the modal view object's limits are checked; opened views
are in ``views_opened``. Canvases are files (canvases.py): ``canvases`` is "paid",
"free" (the free-team rules) or "disabled" (``canvas_disabled_user_team``), and
``channel_canvases=False`` is a tier without channel canvases. ``block_mismatch`` (off by
default, as only one method page names it) makes ``chat.update`` refuse to replace a
message's rich_text blocks with other kinds.

What a test left wrong is raised when the fake closes (after a test body that passed):
malformed acks, and faults injected with ``fail_next`` that no call used up.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import copy
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.loopback import serve
from tests.fakes.slack.ai import AssistantFeatures, StatusChange, Stream
from tests.fakes.slack.blocks import (
    checked_blocks,
    message_content,
    message_metadata,
)
from tests.fakes.slack.canvases import CANVAS_MODES, Canvas, CanvasFeatures
from tests.fakes.slack.cdn import FakeCdn
from tests.fakes.slack.common import (
    TEAM_DOMAIN,
    Json,
    Message,
    SlackError,
    channel_type,
    flag,
    ts_key,
)
from tests.fakes.slack.faults import Fault, Faults
from tests.fakes.slack.files import FileFeatures, UploadedFile, _PendingUpload, _StoredFile
from tests.fakes.slack.kit import MAX_BLOCKS
from tests.fakes.slack.members import Membership
from tests.fakes.slack.outgoing import Outgoing
from tests.fakes.slack.rates import RateLimits
from tests.fakes.slack.sessions import JSON_METHODS, AgentSession, SessionFeatures
from tests.fakes.slack.socket import ACK_DEADLINE_S, MAX_REDELIVERIES, SocketMode, _Socket
from tests.fakes.slack.surfaces import SurfaceRules
from tests.fakes.slack.users import UserActions
from tests.fakes.slack.validate import validate
from tests.fakes.slack.views import TRIGGER_LIFETIME_S, ViewFeatures

__all__ = [
    "DEFAULT_SCOPES",
    "ApiCall",
    "Canvas",
    "FakeSlack",
    "Message",
    "SurfaceRules",
    "UploadedFile",
]

DEFAULT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "chat:write",
    "commands",
    "files:read",
    "files:write",
    "groups:history",
    "im:history",
    "reactions:write",
    "assistant:write",
    "canvases:read",
    "canvases:write",
)
METHOD_SCOPES = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.delete": "chat:write",
    "reactions.add": "reactions:write",
    "reactions.remove": "reactions:write",
    "files.info": "files:read",
    "files.getUploadURLExternal": "files:write",
    "files.completeUploadExternal": "files:write",
    "users.info": "users:read",
    # chat:write in current docs (assistant:write until early 2026), §7.2 and §7.4
    "assistant.threads.setStatus": "chat:write",
    "chat.startStream": "chat:write",
    "chat.appendStream": "chat:write",
    "chat.stopStream": "chat:write",
    "assistant.threads.setSuggestedPrompts": "assistant:write",
    "assistant.threads.setTitle": "assistant:write",
    "canvases.create": "canvases:write",
    "conversations.canvases.create": "canvases:write",
    "canvases.edit": "canvases:write",
    "canvases.access.set": "canvases:write",
    "canvases.access.delete": "canvases:write",
    "canvases.delete": "canvases:write",
    "canvases.sections.lookup": "canvases:read",
    "canvases.getContent": "canvases:read",
    "agents.sessions.setStatus": "chat:write",  # docs.slack.dev: both methods, chat:write
    "agents.sessions.rename": "chat:write",
}
HISTORY_SCOPES = {"channel": "channels:history", "group": "groups:history", "im": "im:history"}
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})

BOT_NAME = "fakebot"


# --------------------------------------------------------------------------- records


@dataclass
class ApiCall:
    """One Web API request as received, and the status it was answered with."""

    method: str  # e.g. "chat.postMessage"
    args: Json  # query string, form and JSON body merged
    headers: dict[str, str]  # lower-case names
    status: int = 0
    error: str | None = None  # the `error` answered; None when ok
    verb: str = "POST"
    at: float = field(default_factory=time.monotonic)  # when it arrived


# --------------------------------------------------------------------------- the fake


class FakeSlack(
    AssistantFeatures,
    CanvasFeatures,
    SessionFeatures,
    FileFeatures,
    SocketMode,
    UserActions,
    ViewFeatures,
):
    """A fake Slack workspace on 127.0.0.1; an async context manager.

    The data-block and canvas switches (the module docstring says more):
    ``refuse_blocks``: block types the workspace lacks (``invalid_blocks`` naming the type);
    ``data_table_revision``: "A" (default) or "B" (201 rows, 20,000 characters);
    ``chart_max_series``: segments or series a chart may hold (6; some sources say 12);
    ``stream_data_blocks``: the stream methods take table-family and chart blocks (False);
    ``surface_rules``: the finer rules of surfaces.py (``SurfaceRules``);
    ``canvases``: "paid", "free" or "disabled"; ``channel_canvases``: the tier has them;
    ``block_mismatch``: ``chat.update`` refuses to swap rich_text blocks for other kinds.
    ``agent_sessions``: the workspace has agent sessions (False: ``feature_disabled``);
    ``session_stop_subscribed``: the app subscribes to ``agent_session_stopped``.
    ``trigger_lifetime_s``: how long an interaction's trigger_id opens a view (views.py).
    A post's ``unfurl_links`` / ``unfurl_media`` are kept on the stored ``Message``.
    """

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-test-token",
        app_token: str = "xapp-1-A0FAKE001-1-test",
        team_id: str = "T0FAKE001",
        bot_user_id: str = "U0BOT0001",
        bot_id: str = "B0BOT0001",
        scopes: Iterable[str] = DEFAULT_SCOPES,
        echo_bot_events: bool = True,
        outside: Iterable[str] = (),
        cdn: bool = True,
        connect_wait_s: float = 5.0,
        spread_events: bool = False,
        stream_lifetime_s: float | None = None,
        ai_refusal: str | None = None,
        rate_limits: float | None = None,
        share_delay_s: float = 0.2,
        ack_deadline_s: float = ACK_DEADLINE_S,
        max_redeliveries: int = MAX_REDELIVERIES,
        refuse_blocks: Iterable[str] = (),
        data_table_revision: str = "A",
        chart_max_series: int = 6,
        stream_data_blocks: bool = False,
        surface_rules: SurfaceRules | None = None,
        canvases: str = "paid",
        channel_canvases: bool = True,
        block_mismatch: bool = False,
        agent_sessions: bool = False,
        session_stop_subscribed: bool = True,
        trigger_lifetime_s: float = TRIGGER_LIFETIME_S,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.scopes = tuple(scopes)
        parts = app_token.split("-")
        self.app_id = parts[2] if len(parts) > 2 else "A0FAKE001"
        # push message / message_changed / message_deleted events for the bot's own posts
        self.echo_bot_events = echo_bot_events
        self.membership = Membership(outside)  # conversations the bot is not in
        self.cdn = FakeCdn() if cdn else None  # url_private_download redirects there
        self.connect_wait_s = connect_wait_s  # how long a push waits for a socket
        self.spread_events = spread_events  # envelopes to random connections (replicas)
        self.delivered_to: dict[str, int] = {}
        self.stream_lifetime_s = stream_lifetime_s  # then appendStream: not in streaming state
        self.share_delay_s = share_delay_s  # an upload's share shows this much later
        self.ai_refusal = ai_refusal  # an error for the status and stream methods (ai)
        # Slack's rate tiers, time sped up by this factor (rates); None: no limits
        self.rate_limits = RateLimits(rate_limits) if rate_limits else None
        self.statuses: list[StatusChange] = []
        self.streams: dict[str, Stream] = {}
        self.prompts: list[Json] = []
        self.titles: dict[tuple[str, str], str] = {}
        self.surface_rules = replace(
            surface_rules or SurfaceRules(),
            refuse_blocks=frozenset(refuse_blocks),
            data_table_revision=data_table_revision,
            chart_max_series=chart_max_series,
            stream_data_blocks=stream_data_blocks,
        )
        if canvases not in CANVAS_MODES:
            raise ValueError(f"canvases must be one of {sorted(CANVAS_MODES)}")
        self.block_mismatch = block_mismatch  # chat.update: rich_text kept rich_text
        self.canvas_mode = canvases
        self.channel_canvases = channel_canvases
        self.canvases: dict[str, Canvas] = {}  # canvas id -> canvas
        self._deleted_canvases: set[str] = set()
        self._locked_canvases: set[str] = set()
        self.agent_sessions = agent_sessions  # False: agents.sessions.* feature_disabled
        self.session_stop_subscribed = session_stop_subscribed  # else a warning, no stop
        self.session_channels: set[str] = set()  # sessions without thread_ts
        self.sessions: dict[tuple[str, str], AgentSession] = {}
        self.session_stops: list[str] = []
        self.trigger_lifetime_s = trigger_lifetime_s
        self.views_opened: list[Json] = []  # views.open's views, as Slack answered them
        self._triggers: dict[str, float] = {}
        self._exchanged: set[str] = set()

        self.base_url = ""
        self.api_url = ""
        self.calls: list[ApiCall] = []
        self.acks: list[Json] = []
        self.envelopes: list[Json] = []  # every envelope sent, in order
        self.sent_at: dict[str, float] = {}  # envelope id -> when it was sent
        self.acked_at: dict[str, float] = {}  # envelope id -> when its first ack arrived
        self.protocol_errors: list[str] = []  # malformed frames from the client
        self.ack_deadline_s = ack_deadline_s  # then an event is delivered again (socket)
        self.max_redeliveries = max_redeliveries
        self.redeliveries: list[Json] = []
        self.late_acks: list[str] = []
        self.lost: list[str] = []
        self.socket_mode_enabled = True
        self.link_refusals = 0
        self._lose_next = 0
        self._closing_index: int | None = None
        self.connections = 0
        self.connection_ports: list[int] = []  # the client's port of each connection, in order
        self.messages: dict[str, list[Message]] = defaultdict(list)
        self.ephemerals: list[Json] = []
        self.reactions: list[tuple[str, str, str]] = []
        self.uploads: dict[str, UploadedFile] = {}
        self.responses: list[Json] = []
        self.downloads: list[tuple[str, bool]] = []  # (file id, authorised)
        self.outgoing = Outgoing()  # crowd mentions and link previews in the bot's posts

        self._files: dict[str, _StoredFile] = {}
        self._pending: dict[str, _PendingUpload] = {}  # upload URL key -> upload
        self._tickets: set[str] = set()
        self._sockets: list[_Socket] = []
        self._sent: dict[str, Json] = {}  # envelope id -> the envelope
        self._faults = Faults()
        self._event_attempts: dict[str, int] = {}
        self._last_us = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._sharing: set[asyncio.Task[None]] = set()  # uploads' shares on their way
        self._runner: web.AppRunner | None = None
        self._methods: dict[str, Callable[[Json], Json]] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._apps_connections_open,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.delete": self._chat_delete,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "conversations.replies": self._conversations_replies,
            "files.info": self._files_info,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
            "users.info": self._users_info,
            "blocks.validate": self._blocks_validate,
            **self._ai_methods(),
            **self._canvas_methods(),
            **self._session_methods(),
            **self._view_methods(),
        }

    # -- lifecycle

    async def __aenter__(self) -> FakeSlack:
        app = web.Application(client_max_size=1024**3)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/link", self._link)
        app.router.add_get("/link/", self._link)
        app.router.add_post("/upload/v1/{key}", self._upload)
        app.router.add_get("/files-pri/{team_file}/download/{name}", self._download)
        app.router.add_get("/files-pri/{team_file}/{name}", self._download)
        app.router.add_post("/commands/{tail:.*}", self._response_url)
        app.router.add_post("/actions/{tail:.*}", self._response_url)
        self._runner, self.base_url = await serve(app)
        self.api_url = f"{self.base_url}/api/"
        if self.cdn is not None:
            await self.cdn.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in list(self._sockets):
            await sock.ws.close(code=1001, message=b"server shutting down")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.cdn is not None:
            await self.cdn.__aexit__(None, None, None)
        if exc is None and (problems := self.problems()):
            raise AssertionError("fake Slack: " + "; ".join(problems))

    # -- inspecting what the bot did

    def problems(self) -> list[str]:
        """What the test left wrong: malformed acks, and faults injected but never used.
        Clear ``protocol_errors`` in a test that sends bad frames on purpose."""
        unused = self._faults.pending(required_only=True)
        return self.protocol_errors + [f"fault never used: {f}" for f in unused]

    def pending_faults(self) -> list[str]:
        """The faults ``fail_next`` queued that no call has used up yet."""
        return self._faults.pending()

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    def method_counts(self) -> dict[str, int]:
        return dict(Counter(c.method for c in self.calls))

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The thread's parent and replies, oldest first."""
        return [
            m
            for m in self.messages.get(channel, [])
            if m["ts"] == thread_ts or m.get("thread_ts") == thread_ts
        ]

    def find_message(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)

    def bot_messages(self, channel: str) -> list[Message]:
        return [m for m in self.messages.get(channel, []) if m.get("bot_id") == self.bot_id]

    async def wait_for(self, predicate: Callable[[], object], timeout: float = 10.0) -> None:
        """Poll ``predicate`` until it is truthy; TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"condition not met within {timeout}s")
            await asyncio.sleep(0.01)

    def fail_next(
        self,
        method: str,
        n: int = 1,
        *,
        status: int = 429,
        retry_after: int = 1,
        error: str = "ratelimited",
        optional: bool = False,
    ) -> None:
        """Answer the next ``n`` calls to ``method`` with ``{"ok": false, "error": error}``.

        Status 429 also carries ``Retry-After``; status 200 makes an ordinary API error.
        Each fault must be used up by the time the fake closes, unless ``optional``.
        """
        self._faults.add(method, Fault(status, retry_after, error, optional), n)

    def remove_bot(self, channel: str) -> None:
        """Take the bot out of a conversation (someone removed it, or never invited it)."""
        self.membership.outside.add(channel)

    # -- Web API

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        headers = {k.lower(): v for k, v in request.headers.items()}
        call = ApiCall(method, {}, headers, verb=request.method)
        self.calls.append(call)
        try:
            call.args = await self._read_args(request)
            self.outgoing.note(method, call.args)
            if fault := self._faults.take(method) or self._rate_limited(method, call.args):
                call.status, call.error = fault.status, fault.error
                return fault.response()
            handler = self._methods.get(method)
            if handler is None:
                raise SlackError("unknown_method", req_method=method)
            self._authorize(method, headers, call.args)
            self.membership.check(method, call.args)
            if method in JSON_METHODS and request.content_type != "application/json":
                raise SlackError("invalid_arguments")  # these take a JSON body only
            body = {"ok": True, **handler(call.args)}
        except SlackError as err:
            call.error = err.error
            body = {"ok": False, "error": err.error, **err.extra}
        call.status = 200
        return web.json_response(body, headers={"X-OAuth-Scopes": ",".join(self.scopes)})

    @staticmethod
    async def _read_args(request: web.Request) -> Json:
        args: Json = dict(request.query)
        if not request.body_exists:
            return args
        if request.content_type == "application/json":
            try:
                body = json.loads(await request.read() or b"{}")
            except ValueError:
                raise SlackError("invalid_json") from None
            if not isinstance(body, dict):
                raise SlackError("invalid_json")
            args.update(body)
        elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            args.update({k: v for k, v in form.items() if isinstance(v, str)})
        return args

    def _rate_limited(self, method: str, args: Json) -> Fault | None:
        if self.rate_limits is None:
            return None
        channel = str(args.get("channel") or args.get("channel_id") or "")
        wait = self.rate_limits.retry_after(method, self.team_id, channel)
        return Fault(429, wait, "ratelimited") if wait else None

    def rate_limited(self) -> list[ApiCall]:
        """The calls answered 429, injected or by the rate tiers."""
        return [c for c in self.calls if c.status == 429]

    def _authorize(self, method: str, headers: dict[str, str], args: Json) -> None:
        auth = headers.get("authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
        if not token and method not in APP_TOKEN_METHODS:
            token = str(args.get("token") or "")  # Slack also takes a token argument
        wanted, other = (
            (self.app_token, self.bot_token)
            if method in APP_TOKEN_METHODS
            else (self.bot_token, self.app_token)
        )
        if not token:
            raise SlackError("not_authed")
        if token == other:
            raise SlackError("not_allowed_token_type")
        if token != wanted:
            raise SlackError("invalid_auth")
        needed = METHOD_SCOPES.get(method)
        if method == "conversations.replies":
            needed = HISTORY_SCOPES[channel_type(str(args.get("channel", "")))]
        if needed and needed not in self.scopes:
            raise SlackError("missing_scope", needed=needed, provided=",".join(self.scopes))

    # -- methods

    def _auth_test(self, args: Json) -> Json:
        return {
            "url": f"https://{TEAM_DOMAIN}.slack.com/",
            "team": "Fake Workspace",
            "user": BOT_NAME,
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, args: Json) -> Json:
        channel = self._channel_arg(args)
        fields = self._bot_fields(message_content(args, required=True, rules=self.surface_rules))
        if metadata := message_metadata(args):
            fields["metadata"] = metadata
        if thread_ts := args.get("thread_ts"):
            fields["thread_ts"] = str(thread_ts)
            if flag(args.get("reply_broadcast")):
                fields["subtype"] = "thread_broadcast"
        message = self._store(channel, fields)
        for key in ("unfurl_links", "unfurl_media"):
            if key in args:
                setattr(message, key, flag(args[key]))
        self._clear_status(channel, fields.get("thread_ts"))
        self._echo(self._as_event(message, subtype=message.get("subtype")))
        return {"channel": channel, "ts": message["ts"], "message": copy.deepcopy(dict(message))}

    def _chat_update(self, args: Json) -> Json:
        channel = self._channel_arg(args)
        message = self._bot_message_arg(channel, args.get("ts"), "cant_update_message")
        if self.streaming(message["ts"]):
            raise SlackError("streaming_state_conflict")
        content = message_content(args, required=False, rules=self.surface_rules)
        swapped = content.get("blocks") and not _rich_text_only(content)
        if self.block_mismatch and swapped and _rich_text_only(message):
            raise SlackError("block_mismatch")
        metadata = message_metadata(args)
        if not content and metadata is None and "file_ids" not in args:
            raise SlackError("no_text")
        previous = copy.deepcopy(dict(message))
        message.history.append(previous)
        for key, value in content.items():
            if value == [] and key in ("blocks", "attachments"):
                message.pop(key, None)  # an empty array removes them
            else:
                message[key] = value
        if metadata is not None:
            message["metadata"] = metadata
        message["edited"] = {"user": self.bot_user_id, "ts": self._next_ts()}
        self._echo(self._changed_event(channel, message, previous))
        return {
            "channel": channel,
            "ts": message["ts"],
            "text": message.get("text", ""),
            "message": copy.deepcopy(dict(message)),
        }

    def _chat_post_ephemeral(self, args: Json) -> Json:
        channel = self._channel_arg(args)
        if not args.get("user"):
            raise SlackError("user_not_in_channel")
        content = message_content(args, required=True, rules=self.surface_rules)
        message_ts = self._next_ts()
        ephemeral = {"channel": channel, "user": args["user"], "message_ts": message_ts, **content}
        if args.get("thread_ts"):
            ephemeral["thread_ts"] = str(args["thread_ts"])
        self.ephemerals.append(ephemeral)
        return {"message_ts": message_ts}

    def _chat_delete(self, args: Json) -> Json:
        channel = self._channel_arg(args)
        message = self._bot_message_arg(channel, args.get("ts"), "cant_delete_message")
        self.messages[channel].remove(message)
        self._unlink_reply(channel, message)
        self.reactions = [r for r in self.reactions if r[:2] != (channel, message["ts"])]
        self._echo(
            {
                "type": "message",
                "subtype": "message_deleted",
                "hidden": True,
                "channel": channel,
                "channel_type": channel_type(channel),
                "ts": self._next_ts(),
                "deleted_ts": message["ts"],
                "previous_message": copy.deepcopy(dict(message)),
            }
        )
        return {"channel": channel, "ts": message["ts"]}

    def _reactions_add(self, args: Json) -> Json:
        channel, message, name = self._reaction_args(args)
        entry = next((r for r in message.setdefault("reactions", []) if r["name"] == name), None)
        if entry and self.bot_user_id in entry["users"]:
            raise SlackError("already_reacted")
        if entry is None:
            entry = {"name": name, "users": [], "count": 0}
            message["reactions"].append(entry)
        entry["users"].append(self.bot_user_id)
        entry["count"] += 1
        self.reactions.append((channel, message["ts"], name))
        return {}

    def _reactions_remove(self, args: Json) -> Json:
        channel, message, name = self._reaction_args(args)
        entries = message.get("reactions", [])
        entry = next((r for r in entries if r["name"] == name), None)
        if entry is None or self.bot_user_id not in entry["users"]:
            raise SlackError("no_reaction")
        entry["users"].remove(self.bot_user_id)
        entry["count"] -= 1
        if not entry["users"]:
            entries.remove(entry)
        if not entries:
            message.pop("reactions", None)
        self.reactions.remove((channel, message["ts"], name))
        return {}

    def _conversations_replies(self, args: Json) -> Json:
        channel = self._channel_arg(args)
        found = self.find_message(channel, str(args.get("ts", "")))
        if found is None:
            raise SlackError("thread_not_found")
        thread = self.thread(channel, found.get("thread_ts") or found["ts"])
        parent, replies = thread[0], [m for m in thread[1:] if self._in_range(m, args)]
        messages = [parent, *replies]
        offset = _decode_cursor(args.get("cursor"))
        limit = max(1, min(int(args.get("limit") or 1000), 1000))
        page = messages[offset : offset + limit]
        more = offset + limit < len(messages)
        cursor = _encode_cursor(offset + limit) if more else ""
        keep_metadata = flag(args.get("include_all_metadata"))
        return {
            "messages": [self._public(m, keep_metadata=keep_metadata) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": cursor},
        }

    def _blocks_validate(self, args: Json) -> Json:
        return validate(args, self.surface_rules)

    def _users_info(self, args: Json) -> Json:
        user = str(args.get("user", ""))
        if not re.fullmatch(r"[UW][A-Z0-9]{2,}", user):
            raise SlackError("user_not_found")
        is_bot = user == self.bot_user_id
        name = BOT_NAME if is_bot else user.lower()
        return {
            "user": {
                "id": user,
                "team_id": self.team_id,
                "name": name,
                "real_name": name,
                "deleted": False,
                "is_bot": is_bot,
                "is_app_user": False,
                "tz": "Europe/London",
                "profile": {"display_name": name, "real_name": name, "team": self.team_id}
                | ({"bot_id": self.bot_id} if is_bot else {}),
            }
        }

    # -- method helpers

    def _checked_blocks(self, blocks: Any, taken_ids: frozenset[str] = frozenset()) -> list[Json]:
        """Blocks given to a stream method (``stopStream`` or a ``blocks`` chunk)."""
        if isinstance(blocks, list) and len(blocks) > MAX_BLOCKS:
            raise SlackError("msg_blocks_too_many")
        rules = replace(self.surface_rules, in_stream=True)
        return checked_blocks(blocks, taken_ids, rules=rules)

    @staticmethod
    def _channel_arg(args: Json) -> str:
        channel = args.get("channel")
        if not channel:
            raise SlackError("channel_not_found")
        return str(channel)

    def _bot_message_arg(self, channel: str, ts: Any, not_mine: str) -> Message:
        message = self.find_message(channel, str(ts or ""))
        if message is None:
            raise SlackError("message_not_found")
        if message.get("bot_id") != self.bot_id:
            raise SlackError(not_mine)
        return message

    def _reaction_args(self, args: Json) -> tuple[str, Message, str]:
        channel = self._channel_arg(args)
        message = self.find_message(channel, str(args.get("timestamp", "")))
        if message is None:
            raise SlackError("message_not_found")
        name = str(args.get("name") or "")
        if not re.fullmatch(r"[a-z0-9_+'-]+(::skin-tone-[2-6])?", name):
            raise SlackError("invalid_name")
        return channel, message, name

    @staticmethod
    def _in_range(message: Json, args: Json) -> bool:
        key, inclusive = ts_key(message["ts"]), flag(args.get("inclusive"))
        oldest, latest = args.get("oldest"), args.get("latest")
        if oldest and (key < ts_key(oldest) or (key == ts_key(oldest) and not inclusive)):
            return False
        return not (latest and (key > ts_key(latest) or (key == ts_key(latest) and not inclusive)))

    @staticmethod
    def _public(message: Message, *, keep_metadata: bool) -> Json:
        out = copy.deepcopy(dict(message))
        if not keep_metadata:
            out.pop("metadata", None)
        return out

    def _bot_fields(self, content: Json) -> Json:
        return {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "app_id": self.app_id,
            "text": "",
            **content,
            "ts": self._next_ts(),
            "team": self.team_id,
            "bot_profile": {
                "id": self.bot_id,
                "app_id": self.app_id,
                "name": BOT_NAME,
                "team_id": self.team_id,
                "deleted": False,
            },
        }

    # -- the store

    def _next_ts(self) -> str:
        """Increasing ``"<epoch>.<6 digits>"`` timestamps."""
        self._last_us = max(time.time_ns() // 1000, self._last_us + 1)
        return f"{self._last_us // 1_000_000}.{self._last_us % 1_000_000:06d}"

    def _store(self, channel: str, fields: Json) -> Message:
        message = Message(channel, fields)
        bisect.insort(self.messages[channel], message, key=lambda m: ts_key(m["ts"]))
        self._link_reply(channel, message)
        return message

    def _link_reply(self, channel: str, message: Message) -> None:
        thread_ts = message.get("thread_ts")
        if not thread_ts or thread_ts == message["ts"]:
            return
        parent = self.find_message(channel, thread_ts)
        if parent is None:
            return
        message.setdefault("parent_user_id", parent.get("user"))
        parent["thread_ts"] = parent["ts"]
        parent["reply_count"] = parent.get("reply_count", 0) + 1
        users = parent.setdefault("reply_users", [])
        if message.get("user") and message["user"] not in users:
            users.append(message["user"])
        parent["reply_users_count"] = len(users)
        parent["latest_reply"] = message["ts"]

    def _unlink_reply(self, channel: str, message: Message) -> None:
        thread_ts = message.get("thread_ts")
        parent = self.find_message(channel, thread_ts) if thread_ts != message["ts"] else None
        if parent is None or not parent.get("reply_count"):
            return
        parent["reply_count"] -= 1
        replies = self.thread(channel, parent["ts"])[1:]
        parent["latest_reply"] = replies[-1]["ts"] if replies else parent["ts"]


def _rich_text_only(content: Json) -> bool:
    """Blocks that are all rich_text (what chat.update may not swap for other kinds)."""
    blocks = content.get("blocks")
    return bool(blocks) and all(b.get("type") == "rich_text" for b in blocks)


def _encode_cursor(offset: int) -> str:
    return base64.b64encode(f"offset:{offset}".encode()).decode()


def _decode_cursor(cursor: Any) -> int:
    if not cursor:
        return 0
    try:
        return int(base64.b64decode(str(cursor)).decode().partition(":")[2])
    except ValueError:
        raise SlackError("invalid_cursor") from None
