"""Slack's AI app methods in the fake: a thread's status and streamed messages
(slack-platform.md §7.2, §7.4, §7.5).

Where the docs leave room, the fake picks one reading and keeps to it:

- ``assistant.threads.setStatus`` needs an existing thread (else ``invalid_thread_ts``) and
  at most 10 ``loading_messages``. ``status=""`` clears the status, and so does the app
  posting in the thread: ``chat.postMessage`` or ``chat.startStream`` there (the docs say "it
  auto-clears when the app posts a reply"; a stream is taken to be such a reply, an
  upload's file share, which Slack posts itself a moment later, is not). The
  2-minute auto-clear is not modelled.
- Streams in channels (ids starting C or G) need ``recipient_user_id`` and
  ``recipient_team_id``; in DMs they are optional.
- ``markdown_text`` and the ``markdown_text`` chunks of one call hold at most 12,000
  characters (``msg_too_long``). The streamed message as a whole holds at most 12,000
  characters of markdown too, like the markdown blocks of one message: the call that would
  pass it is ``msg_too_long``.
- Chunks must have a known ``type``. Every ``task_update`` carries an ``id``, a ``title``
  and a ``status`` of pending, in_progress, complete or error, as slack_sdk's
  ``TaskUpdateChunk`` requires all three, later updates of a task too; ``details`` and
  ``output`` are strings and ``sources`` a list of ``url`` sources (else
  ``invalid_chunks``). The doc gives no length limits for a task's fields; the fake takes
  a title of at most 256 characters and details or output of at most 12,000 (a message's
  markdown). A later ``task_update`` with a known id replaces the fields it gives. Tasks
  may be added at any point; ``task_display_mode`` is fixed by ``chat.startStream`` (later
  calls cannot change it).
- ``stream_lifetime_s`` after its start, or once stopped, a stream answers
  ``message_not_in_streaming_state`` to ``chat.appendStream`` and ``chat.stopStream``; the
  message stays as it was and ``chat.update`` can still edit it. While it streams,
  ``chat.update`` on it is ``streaming_state_conflict`` (§6.1).
- ``press_stop`` is a person pressing Slack's own stop on a streaming message: the stream
  ends where it is, ``chat.appendStream`` then answers ``stopped_by_user`` (§7.4) and
  ``chat.stopStream`` ``message_not_in_streaming_state`` (the doc names ``stopped_by_user``
  for appendStream only; the stream is no longer streaming). The ``agent_session_stopped``
  event that may come with it is not sent: the doc only infers the link, and the SDK does
  not know the event. The session's own stop button is ``press_session_stop`` (sessions.py).
- ``chat.stopStream`` takes ``session_status`` (active, processing, suspended or closed,
  default active; else ``invalid_arguments``) for the thread's session (sessions.py).
- The stored message's ``text`` is all its markdown; its blocks are a ``plan`` block of
  ``task_card``s (details and output kept as given, plain strings), the blocks of
  ``blocks`` chunks (they stay: stopping a stream does not take them away), a ``markdown``
  block, then the blocks given to ``chat.stopStream``, added at the bottom.
- ``assistant.threads.setSuggestedPrompts`` takes 1 to 4 prompts of ``title`` and
  ``message``; without ``thread_ts`` they are pinned to the DM's Messages tab (agent view).
  ``assistant.threads.setTitle`` needs an existing thread and a title. Both need
  ``assistant:write``.
- ``ai_refusal`` (say ``feature_not_enabled``) makes all four methods answer that error,
  like a workspace without the feature.
- Like the bot's other posts, a stream comes back to it as events: a ``message`` when it
  starts and a ``message_changed`` when it stops (appends send none; the doc does not say
  what Slack sends for them).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.slack.common import Json, SlackError

MAX_MARKDOWN = 12_000
MAX_LOADING_MESSAGES = 10
MAX_PROMPTS = 4
MAX_TASK_TITLE = 256  # the doc gives none; an assumption
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
DISPLAY_MODES = frozenset({"timeline", "plan"})
SESSION_STATUSES = frozenset({"active", "processing", "suspended", "closed"})  # sessions.py


@dataclass(frozen=True)
class StatusChange:
    """One change of a thread's status: set by the app, or cleared by its reply."""

    channel: str
    thread_ts: str
    status: str  # "" when cleared
    loading_messages: tuple[str, ...] = ()
    cleared_by_reply: bool = False
    at: float = field(default_factory=time.monotonic)


@dataclass
class Stream:
    """A streamed message's state (the message itself is stored like any other)."""

    channel: str
    ts: str
    started: float
    display_mode: str
    recipient: tuple[str, str]  # (user, team); empty in DMs when not given
    plan_title: str = ""
    tasks: dict[str, Json] = field(default_factory=dict)
    text: str = ""
    stopped: bool = False
    blocks: list[Json] = field(default_factory=list)  # from `blocks` chunks
    final_blocks: list[Json] = field(default_factory=list)  # given to chat.stopStream
    calls: int = 0  # start, appends and stop
    stopped_by_user: str = ""  # who pressed Slack's stop on it


class AssistantFeatures:
    """Mixed into FakeSlack: ``assistant.threads.setStatus`` and ``chat.*Stream``."""

    team_id: str
    stream_lifetime_s: float | None
    ai_refusal: str | None
    statuses: list[StatusChange]
    streams: dict[str, Stream]
    prompts: list[Json]  # each setSuggestedPrompts call's channel, thread_ts and prompts
    titles: dict[tuple[str, str], str]  # (channel, thread_ts) -> title

    # provided by FakeSlack
    find_message: Any
    _channel_arg: Any
    _bot_fields: Any
    _store: Any
    _checked_blocks: Any
    _echo: Any
    _as_event: Any
    _changed_event: Any
    _session_stream_stopped: Any

    def _ai_methods(self) -> dict[str, Any]:
        return {
            "assistant.threads.setStatus": self._set_status,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "assistant.threads.setSuggestedPrompts": self._set_suggested_prompts,
            "assistant.threads.setTitle": self._set_title,
        }

    # -- inspecting

    def status_history(self, channel: str, thread_ts: str) -> list[str]:
        """The thread's statuses in order, "" for each clearing."""
        return [s.status for s in self.statuses if (s.channel, s.thread_ts) == (channel, thread_ts)]

    def thread_status(self, channel: str, thread_ts: str) -> str:
        history = self.status_history(channel, thread_ts)
        return history[-1] if history else ""

    def streaming(self, ts: str) -> bool:
        """Is the message `ts` a stream that still takes chunks?"""
        stream = self.streams.get(ts)
        return stream is not None and not (stream.stopped or self._expired(stream))

    # -- what people do

    def press_stop(self, channel: str, ts: str, user: str = "U0HUMAN01") -> None:
        """A person presses Slack's stop on a streaming message."""
        stream = self.streams.get(ts)
        if stream is None or stream.channel != channel or not self.streaming(ts):
            raise LookupError(f"no message streaming at {channel}/{ts}")
        stream.stopped, stream.stopped_by_user = True, user

    # -- methods

    def _set_status(self, args: Json) -> Json:
        self._refuse()
        channel = str(args.get("channel_id") or "")
        if not channel:
            raise SlackError("channel_not_found")
        thread_ts = str(args.get("thread_ts") or "")
        if not thread_ts or self.find_message(channel, thread_ts) is None:
            raise SlackError("invalid_thread_ts")
        loading = args.get("loading_messages") or []
        if not isinstance(loading, list) or len(loading) > MAX_LOADING_MESSAGES:
            raise SlackError("invalid_arguments")
        if "status" not in args:
            raise SlackError("invalid_arguments")
        status = str(args["status"])
        self.statuses.append(StatusChange(channel, thread_ts, status, tuple(map(str, loading))))
        return {}

    def _set_suggested_prompts(self, args: Json) -> Json:
        channel = str(args.get("channel_id") or "")
        if not channel:
            raise SlackError("channel_not_found")
        thread_ts = str(args.get("thread_ts") or "")
        if thread_ts and self.find_message(channel, thread_ts) is None:
            raise SlackError("invalid_thread_ts")
        prompts = args.get("prompts")
        if not isinstance(prompts, list) or not 1 <= len(prompts) <= MAX_PROMPTS:
            raise SlackError("invalid_arguments")
        for prompt in prompts:
            if not isinstance(prompt, dict) or not prompt.get("title") or not prompt.get("message"):
                raise SlackError("invalid_arguments")
        self.prompts.append({"channel": channel, "thread_ts": thread_ts, "prompts": prompts})
        return {}

    def _set_title(self, args: Json) -> Json:
        channel = str(args.get("channel_id") or "")
        thread_ts = str(args.get("thread_ts") or "")
        if not channel:
            raise SlackError("channel_not_found")
        if not thread_ts or self.find_message(channel, thread_ts) is None:
            raise SlackError("invalid_thread_ts")
        if not str(args.get("title") or "").strip():
            raise SlackError("invalid_arguments")
        self.titles[(channel, thread_ts)] = str(args["title"])
        return {}

    def _clear_status(self, channel: str, thread_ts: str | None) -> None:
        """The app posted in the thread: a status it showed goes away."""
        if thread_ts and self.thread_status(channel, thread_ts):
            self.statuses.append(StatusChange(channel, thread_ts, "", cleared_by_reply=True))

    def _start_stream(self, args: Json) -> Json:
        self._refuse()
        channel = self._channel_arg(args)
        thread_ts = str(args.get("thread_ts") or "")
        if not thread_ts or self.find_message(channel, thread_ts) is None:
            raise SlackError("invalid_thread_ts")
        user = str(args.get("recipient_user_id") or "")
        team = str(args.get("recipient_team_id") or "")
        if channel[:1] in ("C", "G"):
            if not user:
                raise SlackError("missing_recipient_user_id")
            if not team:
                raise SlackError("missing_recipient_team_id")
        mode = str(args.get("task_display_mode") or "timeline")
        if mode not in DISPLAY_MODES:
            raise SlackError("invalid_arguments")
        fields = self._bot_fields({"text": "", "thread_ts": thread_ts})
        stream = Stream(channel, fields["ts"], time.monotonic(), mode, (user, team))
        self._apply(stream, args)
        message = self._store(channel, fields)
        self._clear_status(channel, thread_ts)
        self.streams[stream.ts] = stream
        self._render(stream, message)
        self._echo(self._as_event(message, subtype=None))
        return {"channel": channel, "ts": stream.ts}

    def _append_stream(self, args: Json) -> Json:
        stream, message = self._live_stream(args, appending=True)
        if args.get("markdown_text") is None and not args.get("chunks"):
            raise SlackError("no_text")
        self._apply(stream, args)
        self._render(stream, message)
        return {"channel": stream.channel, "ts": stream.ts}

    def _stop_stream(self, args: Json) -> Json:
        stream, message = self._live_stream(args, appending=False)
        session_status = str(args.get("session_status") or "active")  # sessions.py
        if session_status not in SESSION_STATUSES:
            raise SlackError("invalid_arguments")
        blocks = args.get("blocks")
        previous = copy.deepcopy(dict(message))
        self._apply(stream, args)
        if blocks:
            stream.final_blocks += self._checked_blocks(blocks, _block_ids(stream))
        stream.stopped = True
        self._session_stream_stopped(stream, session_status)
        self._render(stream, message)
        self._echo(self._changed_event(stream.channel, message, previous))
        return {"channel": stream.channel, "ts": stream.ts, "message": dict(message)}

    # -- helpers

    def _refuse(self) -> None:
        if self.ai_refusal:
            raise SlackError(self.ai_refusal)

    def _live_stream(self, args: Json, *, appending: bool) -> tuple[Stream, Any]:
        self._refuse()
        channel = self._channel_arg(args)
        stream = self.streams.get(str(args.get("ts") or ""))
        message = self.find_message(channel, str(args.get("ts") or ""))
        if stream is None or message is None or stream.channel != channel:
            raise SlackError("message_not_found")
        if stream.stopped_by_user and appending:
            raise SlackError("stopped_by_user")
        if stream.stopped or self._expired(stream):
            raise SlackError("message_not_in_streaming_state")
        return stream, message

    def _expired(self, stream: Stream) -> bool:
        lifetime = self.stream_lifetime_s
        return lifetime is not None and time.monotonic() - stream.started > lifetime

    def _apply(self, stream: Stream, args: Json) -> None:
        """Check a call's markdown and chunks, then add them to the stream, in order."""
        chunks = args.get("chunks") or []
        if not isinstance(chunks, list):
            raise SlackError("invalid_chunks")
        markdown = args.get("markdown_text")
        pieces = [{"type": "markdown_text", "text": str(markdown)}] if markdown else []
        pieces += [_checked_chunk(c) for c in chunks]
        added = sum(len(p["text"]) for p in pieces if p["type"] == "markdown_text")
        if added > MAX_MARKDOWN or len(stream.text) + added > MAX_MARKDOWN:
            raise SlackError("msg_too_long")
        for piece in pieces:
            _add(stream, piece, self._checked_blocks)
        stream.calls += 1

    @staticmethod
    def _render(stream: Stream, message: Any) -> None:
        blocks: list[Json] = []
        if stream.tasks or stream.plan_title:
            tasks = [{"type": "task_card", **t} for t in stream.tasks.values()]
            blocks.append({"type": "plan", "title": stream.plan_title, "tasks": tasks})
        blocks += stream.blocks
        if stream.text:
            blocks.append({"type": "markdown", "text": stream.text})
        message["text"] = stream.text
        message["blocks"] = blocks + stream.final_blocks


def _checked_chunk(chunk: Any) -> Json:
    if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
        raise SlackError("invalid_chunks")
    kind = chunk["type"]
    if kind == "markdown_text" and not isinstance(chunk.get("text"), str):
        raise SlackError("invalid_chunks")
    if kind == "plan_update" and not isinstance(chunk.get("title"), str):
        raise SlackError("invalid_chunks")
    if kind == "blocks" and not isinstance(chunk.get("blocks"), list):
        raise SlackError("invalid_chunks")
    if kind == "task_update" and not _task_ok(chunk):
        raise SlackError("invalid_chunks")
    return chunk


def _block_ids(stream: Stream) -> frozenset[str]:
    """The block_ids the streamed message has so far: a new one must differ."""
    return frozenset(b["block_id"] for b in stream.blocks + stream.final_blocks if "block_id" in b)


def _task_ok(chunk: Json) -> bool:
    """A task_update as slack_sdk's TaskUpdateChunk has it: id, title and status always."""
    task_id, title = chunk.get("id"), chunk.get("title")
    if not (isinstance(task_id, str) and task_id and isinstance(title, str) and title.strip()):
        return False
    if len(title) > MAX_TASK_TITLE or chunk.get("status") not in TASK_STATUSES:
        return False
    for key in ("details", "output"):
        value = chunk.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_MARKDOWN):
            return False
    sources = chunk.get("sources")
    if sources is None:
        return True
    return isinstance(sources, list) and all(
        isinstance(s, dict) and s.get("type") == "url" and isinstance(s.get("url"), str)
        for s in sources
    )


def _add(stream: Stream, chunk: Json, checked_blocks: Any) -> None:
    match chunk["type"]:
        case "markdown_text":
            stream.text += chunk["text"]
        case "plan_update":
            stream.plan_title = chunk["title"]
        case "blocks":
            stream.blocks += checked_blocks(chunk["blocks"], _block_ids(stream))
        case "task_update":
            task = stream.tasks.setdefault(chunk["id"], {"task_id": chunk["id"]})
            keep = ("title", "status", "details", "output", "sources")
            task.update({k: chunk[k] for k in keep if k in chunk})
