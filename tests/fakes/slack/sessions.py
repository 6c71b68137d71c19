"""Slack's agent sessions in the fake: a thread's session status, its title, and the native
stop button a person presses (docs.slack.dev: ai/agent-sessions, the agents.sessions.*
methods, the agent_session_stopped event).

- ``agents.sessions.setStatus`` takes a JSON body (as slack_sdk sends it; a form body is
  ``invalid_arguments``) of ``channel_id`` and ``status`` (active, processing, suspended
  or closed, else ``invalid_status``), and creates the session when there is none.
  ``thread_ts`` is required (``thread_ts_required``) outside the "session channels" a test
  declares (``session_channels``), where it is ``thread_ts_not_allowed``. ``title`` (at most
  200 characters, else ``invalid_arguments``: the doc names no code) and
  ``initiator_user_id`` (``user_not_found`` unless it looks like a user id) count only when
  the call creates the session. ``icon_emoji``, ``icon_url`` and ``username`` need
  ``chat:write.customize``.
- ``agents.sessions.rename``: ``title`` of 1 to 200 characters (``invalid_name``), on a
  session that exists (``session_not_found``).
- Both answer ``feature_disabled`` in a workspace without agent sessions
  (``FakeSlack(agent_sessions=False)``, the default), ``not_authorized`` where the bot is
  not in the conversation (members.py), ``channel_not_found`` for an id that is no
  conversation's. While the app is not subscribed to ``agent_session_stopped``
  (``session_stop_subscribed=False``) setStatus adds the warning
  ``missing_agent_session_stopped_event_subscription``; Slack then shows no stop button,
  so ``press_session_stop`` refuses.
- ``chat.stopStream``'s ``session_status`` (default ``active``) moves the thread's session,
  if it has one; a thread without a session gets none (assumed: the doc only says "the
  session status to set").
- ``press_session_stop`` is a person pressing the session's stop button, shown while it is
  ``processing``: the thread's streams still streaming end where they are (appendStream
  then answers ``stopped_by_user``, stopStream ``message_not_in_streaming_state``), and
  ``agent_session_stopped`` goes to the app over Socket Mode. The status stays
  ``processing`` until the app moves it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.slack.ai import SESSION_STATUSES, Stream
from tests.fakes.slack.common import Json, SlackError
from tests.fakes.slack.members import Membership

MAX_TITLE = 200
CUSTOMIZE = ("icon_emoji", "icon_url", "username")
NO_STOP_SUBSCRIPTION = "missing_agent_session_stopped_event_subscription"
JSON_METHODS = frozenset({"agents.sessions.setStatus", "agents.sessions.rename"})


@dataclass
class AgentSession:
    """One thread's session: its title and every status it was given, in order."""

    channel: str
    thread_ts: str
    title: str = ""
    initiator: str = ""
    history: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.history[-1] if self.history else ""


class SessionFeatures:
    """Mixed into FakeSlack: ``agents.sessions.*`` and the session's stop button."""

    agent_sessions: bool  # the workspace has the feature
    session_stop_subscribed: bool  # the app's manifest lists agent_session_stopped
    session_channels: set[str]  # channels that are sessions themselves (no thread_ts)
    sessions: dict[tuple[str, str], AgentSession]  # (channel, thread_ts or "") -> session
    session_stops: list[str]  # the envelope ids press_session_stop sent
    scopes: tuple[str, ...]
    membership: Membership
    streams: dict[str, Stream]
    # provided by FakeSlack
    find_message: Any
    streaming: Any
    push_event: Any

    def _session_methods(self) -> dict[str, Any]:
        return {
            "agents.sessions.setStatus": self._session_set_status,
            "agents.sessions.rename": self._session_rename,
        }

    # -- inspecting

    def session_history(self, channel: str, thread_ts: str) -> list[str]:
        """The session's statuses in order ([] when the thread has no session)."""
        session = self.sessions.get((channel, thread_ts))
        return list(session.history) if session else []

    def session_status(self, channel: str, thread_ts: str) -> str:
        """The session's status now ("" when the thread has no session)."""
        session = self.sessions.get((channel, thread_ts))
        return session.status if session else ""

    # -- what people do

    async def press_session_stop(
        self,
        channel: str,
        thread_ts: str,
        user: str = "U0HUMAN01",
        *,
        connection: int | None = None,
    ) -> str:
        """A person presses the session's stop button; returns the envelope id of the
        ``agent_session_stopped`` event sent for it (to `connection`, else Slack's pick)."""
        session = self.sessions.get((channel, thread_ts))
        if session is None or session.status != "processing":
            raise LookupError(f"no session processing at {channel}/{thread_ts}")
        if not self.session_stop_subscribed:
            raise LookupError("no stop button: the app is not subscribed to the event")
        stopped = [s for s in self._thread_streams(channel, thread_ts) if self.streaming(s.ts)]
        for stream in stopped:
            stream.stopped, stream.stopped_by_user = True, user
        event = self.session_stop_event(channel, thread_ts, user, [s.ts for s in stopped])
        envelope_id = await self.push_event(event, connection=connection)
        self.session_stops.append(envelope_id)
        return envelope_id

    @staticmethod
    def session_stop_event(
        channel: str, thread_ts: str, user: str, streaming: list[str] | None = None
    ) -> Json:
        """The ``agent_session_stopped`` event Slack sends (push it with ``push_event``)."""
        return {
            "type": "agent_session_stopped",
            "channel": channel,
            "user": user,
            "thread_ts": thread_ts,
            "streaming_message_ts": list(streaming or []),
        }

    # -- methods

    def _session_set_status(self, args: Json) -> Json:
        channel, thread_ts = self._session_place(args)
        status = args.get("status")
        if status not in SESSION_STATUSES:
            raise SlackError("invalid_status")
        customized = any(args.get(k) is not None for k in CUSTOMIZE)
        if customized and "chat:write.customize" not in self.scopes:
            raise SlackError("missing_scope", needed="chat:write.customize")
        session = self.sessions.get((channel, thread_ts))
        if session is None:
            session = self._new_session(channel, thread_ts, args)
        session.history.append(str(status))
        body: Json = {"status": status, "agent_status": status, "title": session.title}
        if not self.session_stop_subscribed:
            body["warning"] = NO_STOP_SUBSCRIPTION
        return body

    def _session_rename(self, args: Json) -> Json:
        channel, thread_ts = self._session_place(args)
        title = args.get("title")
        if not isinstance(title, str) or not 1 <= len(title) <= MAX_TITLE:
            raise SlackError("invalid_name")
        session = self.sessions.get((channel, thread_ts))
        if session is None:
            raise SlackError("session_not_found")
        session.title = title
        return {"title": title}

    def _session_stream_stopped(self, stream: Stream, status: str) -> None:
        """chat.stopStream's session_status, for the stream's thread's session."""
        message = self.find_message(stream.channel, stream.ts) or {}
        session = self.sessions.get((stream.channel, str(message.get("thread_ts") or "")))
        if session is not None:
            session.history.append(status)

    # -- helpers

    def _session_place(self, args: Json) -> tuple[str, str]:
        """The session's (channel, thread_ts) a call names, checked."""
        if not self.agent_sessions:
            raise SlackError("feature_disabled")
        channel = str(args.get("channel_id") or "")
        if not re.fullmatch(r"[CGD][A-Z0-9]{2,}", channel):
            raise SlackError("channel_not_found")
        if channel not in self.membership:
            raise SlackError("not_authorized")
        thread_ts = str(args.get("thread_ts") or "")
        if channel in self.session_channels and thread_ts:
            raise SlackError("thread_ts_not_allowed")
        if channel not in self.session_channels and not thread_ts:
            raise SlackError("thread_ts_required")
        return channel, thread_ts

    def _new_session(self, channel: str, thread_ts: str, args: Json) -> AgentSession:
        title = args.get("title")
        if title is not None and (not isinstance(title, str) or len(title) > MAX_TITLE):
            raise SlackError("invalid_arguments")
        initiator = str(args.get("initiator_user_id") or "")
        if initiator and not re.fullmatch(r"[UW][A-Z0-9]{2,}", initiator):
            raise SlackError("user_not_found")
        session = AgentSession(channel, thread_ts, str(title or ""), initiator)
        self.sessions[(channel, thread_ts)] = session
        return session

    def _thread_streams(self, channel: str, thread_ts: str) -> list[Stream]:
        return [
            s
            for s in self.streams.values()
            if s.channel == channel
            and (self.find_message(channel, s.ts) or {}).get("thread_ts") == thread_ts
        ]
