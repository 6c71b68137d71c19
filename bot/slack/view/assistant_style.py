"""A run in Slack's assistant style: the thread's status line ("is analyzing your data…",
naming the current step), then one streamed message holding a plan, with a task per file
that came with the question and per tool call, a Stop button, and at the end the answer,
its footer and feedback buttons. The stream starts with the first thing to show, so a run
that only answers (or ends before Slack's limits let its stream start) is one plain
message. Nothing here makes the run wait for Slack but its last message. A workspace that
refuses the status gets no assistant style (`begin` says False); one that refuses the stream
is seen in `refused`, and the run view goes on in the classic style.

Where the thread has an agent session (agent_sessions.py; the run view set it to
`processing`), the session is the run's sign of life: Slack draws its own loading indicator
and stop button, so the thread's status is not set too, and a stop pressed there comes as
`agent_session_stopped` (handlers.py), which names who pressed it. The run's last
`chat.stopStream` moves the session to `active`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from bot.run_events import RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack.render import block_kit, stream_chunks, wording
from bot.slack.threads import ThreadRef
from bot.slack.view.agent_sessions import ACTIVE, PROCESSING, AgentSessions
from bot.slack.view.assistant_threads import AssistantThreads
from bot.slack.view.stream import LiveMessage
from bot.slack.web.errors import SlackGone

log = logging.getLogger(__name__)

STATUS_REFRESH_S = 90.0  # Slack clears a status after 2 minutes without a message


class AssistantStyle:
    def __init__(
        self,
        threads: AssistantThreads,
        ref: ThreadRef,
        run_id: str,
        user: str,
        *,
        refresh_s: float = STATUS_REFRESH_S,
        sessions: AgentSessions | None = None,
    ) -> None:
        self._threads, self._ref, self._run_id, self._user = threads, ref, run_id, user
        self._sessions = sessions
        # the session shows the run (set before begin); the thread's status is not needed
        self._in_session = sessions is not None and sessions.status(ref) == PROCESSING
        self._started = time.monotonic()
        self._refresh_s = refresh_s
        self._loading = [wording.READING_QUESTION]
        self.notes: list[str] = []  # the held file notes, should the stream never start
        self._live: LiveMessage | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._run_task: asyncio.Task[None] | None = None  # the run's own task, to stop it
        self._worked = False  # a step ran: the answer gets Show work and Notebook

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    @property
    def refused(self) -> bool:
        """The workspace refused the stream (the status it allowed)."""
        return bool(self._stream.refused)

    @property
    def gone(self) -> SlackGone | None:
        """Slack's answer, when a call in the background found the bot out of the channel."""
        return self._stream.gone

    async def begin(self) -> bool:
        """Show the run; False when the workspace refuses (the caller draws it classic)."""
        showing = self._in_session or self._threads.status_showing(self._ref)
        if not showing and not await self._threads.set_status(self._ref, self._loading):
            return False
        # RunStarted is shown from the run's own task, the one a Stop cancels
        self._run_task = asyncio.current_task()
        held = self._threads.claim(self._ref.key)
        self.notes = [note.text for note in held]
        opening = stream_chunks.plan_opening(self._run_id, [note.task for note in held])
        self._live = LiveMessage(
            self._threads.web,
            self._ref,
            self._user,
            opening,
            on_wait=self.waiting,
            on_stopped=self._stopped_in_slack,
        )
        if held:
            self._live.add([])  # the files are something to show already
        if not self._in_session:
            self._refresher = asyncio.create_task(self._refresh())
        return True

    async def step_started(self, step: int, event: ToolCallStarted) -> None:
        self._worked = True
        self._loading = [stream_chunks.step_title(step, event)]
        if self._stream.starting and not self._in_session:  # the status names the step
            await self._threads.set_status(self._ref, self._loading)
        self._stream.add([stream_chunks.task_started(step, event)])

    async def step_finished(self, step: int, event: ToolCallFinished) -> None:
        self._stream.add([stream_chunks.task_finished(step, event)])

    async def finished(self, event: RunFinished) -> None:
        await self._end()
        blocks = block_kit.answer_end(event, self.elapsed_s, self._run_id, worked=self._worked)
        await self._finish(event.answer or wording.NO_ANSWER, blocks)

    async def stopped(self, by: str | None) -> None:
        await self._end()
        await self._finish(wording.stopped(by), [])

    async def failed(self, message: str) -> None:
        await self._end()
        await self._finish(wording.failed(message), [])

    async def _finish(self, text: str, blocks: list[Any]) -> None:
        """The last words; the session goes `active` with the stream's stop where it can
        (else the run view sets it)."""
        status = ACTIVE if self._in_session else None
        if await self._stream.finish(text, blocks, self.notes, status) and self._sessions:
            self._sessions.noted(self._ref, ACTIVE)

    def abandon(self) -> None:
        """The channel is gone: stop refreshing the status and streaming, with no further
        call to Slack."""
        if self._refresher is not None:
            self._refresher.cancel()
        if self._live is not None:
            self._live.abandon()

    async def uploaded(self) -> None:
        """The run's files are on their way: a wait shown for them goes from the status
        (their share is no reply that clears it)."""
        if self._threads.status_showing(self._ref):
            await self._threads.clear_status(self._ref)

    def _stopped_in_slack(self) -> None:
        """Someone pressed Slack's own stop on the streamed message: they want the run
        stopped, as the Stop button stops it (the engine then shows it stopped). Slack
        names no one (`stopped_by_user` only); the stream is addressed to the asker
        (recipient_user_id), so this is taken as the asker's stop, which Stop allows.
        In a session, the stop is the session's: its event names who pressed it, and the
        Stop button's rules decide (handlers.py)."""
        if self._in_session:
            log.info(
                "run %s: its stream was stopped in Slack; the session's event decides", self._run_id
            )
            return
        if self._run_task is not None and not self._run_task.done():
            log.info("run %s stopped from Slack's stop on its message", self._run_id)
            self._run_task.cancel()

    async def waiting(self, wait_s: float) -> None:
        """Slack's rate limits hold a call back: say so in the status while it waits."""
        if not self._in_session:
            await self._threads.set_status(self._ref, [wording.slack_wait(wait_s), *self._loading])

    @property
    def _stream(self) -> LiveMessage:
        assert self._live is not None, "run events come after begin()"
        return self._live

    async def _end(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        if self._threads.status_showing(self._ref) and self._stream.ts is not None:
            await self._threads.clear_status(self._ref)  # else the reply to come clears it

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            await self._threads.set_status(self._ref, self._loading)
