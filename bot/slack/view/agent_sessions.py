"""Slack's agent sessions for the bot's threads: a thread's session status, which gives the
person Slack's own loading indicator and stop button while a run goes (`processing`), and
says when it is done (`active`) or its sandbox is gone for idleness (`closed`).

Whether a workspace has sessions is learnt from its first `agents.sessions.setStatus`: an
answer that says "not here" (the feature off, the app not declared an agent, the token or
its scopes wrong) is kept for the team and logged once; a transient one (Slack busy, the
network) is only logged, and the next call asks again. The session's status is never the
run's business: a call that fails costs the run nothing."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackBusy, SlackError, SlackRefused

log = logging.getLogger(__name__)

PROCESSING, ACTIVE, CLOSED = "processing", "active", "closed"
# Slack's answers that mean this workspace (or this app) has no agent sessions.
NOT_HERE = frozenset({"feature_disabled", "not_authorized"})
NO_STOP_SUBSCRIPTION = "missing_agent_session_stopped_event_subscription"
# A status call that would wait longer than this in Slack's pacing (Tier 3: a burst of
# questions) is made in the background: the first sign of a question must not queue.
FIRST_SIGN_WAIT_S = 0.5


class AgentSessions:
    def __init__(self, web: SlackWeb) -> None:
        self._web = web
        self._absent: dict[str, str] = {}  # team -> why it has no sessions
        self._warned: set[str] = set()  # teams told about the missing event subscription
        self._status: dict[tuple[str, str], str] = {}  # thread -> the status set last
        self._pending: set[asyncio.Task[bool]] = set()  # statuses set in the background

    def would_wait(self) -> bool:
        """Whether a status call now would wait in Slack's pacing for long."""
        return self._web.pacer.wait_s("agents.sessions.setStatus") > FIRST_SIGN_WAIT_S

    def set_later(self, ref: ThreadRef, status: str) -> None:
        """Set the status in the background (its failures are logged, as `set`'s are)."""
        task = asyncio.create_task(self.set(ref, status))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def available(self, team: str) -> bool:
        """Not known to lack sessions (a team never asked is taken to have them)."""
        return team not in self._absent

    def status(self, ref: ThreadRef) -> str:
        """The status this process set last on the thread's session ("" if none)."""
        return self._status.get((ref.channel, ref.ts), "")

    def noted(self, ref: ThreadRef, status: str) -> None:
        """Another call set the status (chat.stopStream's `session_status`)."""
        self._status[(ref.channel, ref.ts)] = status

    async def set(self, ref: ThreadRef, status: str) -> bool:
        """Set the thread's session status; False where there are no sessions, or the call
        failed (logged)."""
        if not self.available(ref.team):
            return False
        try:
            warning = await self._web.set_session_status(ref.channel, ref.ts, status)
        except (SlackBusy, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("could not set the agent session's status to %s: %s", status, exc)
            return False
        except SlackError as exc:
            if isinstance(exc, SlackRefused) or exc.code in NOT_HERE:
                self._learn_absent(ref.team, exc.code)
            else:
                log.warning("could not set the agent session's status: %s", exc.code)
            return False
        if warning == NO_STOP_SUBSCRIPTION and ref.team not in self._warned:
            self._warned.add(ref.team)
            log.warning(
                "Slack says the app is not subscribed to agent_session_stopped: people see "
                "no stop button on its sessions. Add the event to the app's bot events."
            )
        self._status[(ref.channel, ref.ts)] = status
        return True

    def _learn_absent(self, team: str, why: str) -> None:
        if team not in self._absent:
            self._absent[team] = why
            log.info("workspace %s has no agent sessions for this app (%s)", team, why)
