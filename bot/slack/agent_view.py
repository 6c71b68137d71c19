"""A run in Slack's agent style: the thread's status line ("is analyzing your data…",
naming the current step), then one streamed message holding a plan, with a task per file
that came with the question and per tool call, a Stop button, and at the end the answer,
its footer and feedback buttons. The stream starts with the first thing to show, so a run
that only answers (or ends before Slack's limits let its stream start) is one plain
message. Nothing here makes the run wait for Slack but its last message. A workspace that
refuses streaming or status gets the classic rendering instead (remembered per workspace,
logged once)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from bot.agent.events import Event, RunFailed, RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack import render
from bot.slack.agent_threads import AgentThreads
from bot.slack.live_message import LiveMessage
from bot.slack.progress import SlackProgress
from bot.slack.threads import ThreadRef

log = logging.getLogger(__name__)

STATUS_REFRESH_S = 90.0  # Slack clears a status after 2 minutes without a message
PLAN_TITLE = "Working on it"


class AgentRun:
    def __init__(
        self,
        threads: AgentThreads,
        ref: ThreadRef,
        run_id: str,
        user: str,
        *,
        refresh_s: float = STATUS_REFRESH_S,
    ) -> None:
        self._threads, self._ref, self._run_id, self._user = threads, ref, run_id, user
        self._started = time.monotonic()
        self._refresh_s = refresh_s
        self._steps: dict[str, str] = {}  # call id -> its task's title
        self._loading = ["Reading the question…"]
        self._notes: list[str] = []  # the held file notes, should the stream never start
        self._live: LiveMessage | None = None
        self._classic: SlackProgress | None = None  # when the stream was refused mid-run
        self._refresher: asyncio.Task[None] | None = None
        self._run_task: asyncio.Task | None = None  # the run's own task, to stop it

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    async def begin(self) -> bool:
        """Show the run; False when the workspace refuses (the caller draws it classic)."""
        showing = self._threads.status_showing(self._ref)
        if not showing and not await self._threads.set_status(self._ref, self._loading):
            return False
        # RunStarted is shown from the run's own task, the one a Stop cancels
        self._run_task = asyncio.current_task()
        held = self._threads.claim(self._ref.key)
        self._notes = [note.text for note in held]
        opening = [
            {"type": "plan_update", "title": PLAN_TITLE},
            *(note.task for note in held),
            {"type": "blocks", "blocks": [render.stop_button(self._run_id)]},
        ]
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
        self._refresher = asyncio.create_task(self._refresh())
        return True

    async def __call__(self, event: Event) -> None:
        if self._stream.gone is not None:  # the bot left the channel: the view stops the run
            raise self._stream.gone
        if self._classic is None and self._stream.refused:
            await self._go_classic()
        if self._classic is not None:
            await self._classic(event)
            return
        match event:
            case ToolCallStarted():
                step = len(self._steps) + 1
                title = self._steps[event.call_id] = render.step_title(step, event)
                self._loading = [title]
                if self._stream.starting:  # not up yet: the status names the step meanwhile
                    await self._threads.set_status(self._ref, self._loading)
                self._stream.add([render.task_started(step, event)])
            case ToolCallFinished() if event.call_id in self._steps:
                self._stream.add([render.task_finished(self._steps[event.call_id], event)])
            case RunFinished():
                await self._end()
                footer = render.context(render.footer(event, self.elapsed_s))
                blocks = [footer, render.feedback(self._run_id)]
                await self._stream.finish(event.answer or "_(no answer)_", blocks, self._notes)
            case RunFailed():
                await self.failed(event.reason)

    async def stopped(self, by: str | None) -> None:
        if self._classic is not None:
            await self._classic.stopped(by)
            return
        who = f" by <@{by}>" if by else ""
        await self._end()
        said = f":octagonal_sign: Stopped{who}. Ask again when you are ready."
        await self._stream.finish(said, [], self._notes)

    async def failed(self, message: str) -> None:
        if self._classic is not None:
            await self._classic.failed(message)
            return
        await self._end()
        await self._stream.finish(f":warning: {message}", [], self._notes)

    def abandon(self) -> None:
        """The channel is gone: stop refreshing the status and streaming, with no further
        call to Slack."""
        if self._refresher is not None:
            self._refresher.cancel()
        if self._live is not None:
            self._live.abandon()
        if self._classic is not None:
            self._classic.abandon()

    async def uploaded(self) -> None:
        """The run's files are on their way: a wait shown for them goes from the status
        (their share is no reply that clears it)."""
        if self._threads.status_showing(self._ref):
            await self._threads.clear_status(self._ref)

    def _stopped_in_slack(self) -> None:
        """Someone pressed Slack's own stop on the streamed message: they want the run
        stopped, as the Stop button stops it (the engine then shows it stopped). Slack
        names no one (`stopped_by_user` only); the stream is addressed to the asker
        (recipient_user_id), so this is taken as the asker's stop, which Stop allows."""
        if self._run_task is not None and not self._run_task.done():
            log.info("run %s stopped from Slack's stop on its message", self._run_id)
            self._run_task.cancel()

    async def waiting(self, wait_s: float) -> None:
        """Slack's rate limits hold a call back: say so in the status while it waits."""
        note = f"Waiting about {wait_s:.0f}s for Slack (this workspace is busy)…"
        await self._threads.set_status(self._ref, [note, *self._loading])

    @property
    def _stream(self) -> LiveMessage:
        assert self._live is not None, "run events come after begin()"
        return self._live

    async def _go_classic(self) -> None:
        """The stream was refused after the status was not: the rest of the run in
        classic messages, after the notes on its files."""
        for note in self._notes:
            await self._threads.web.post(self._ref.channel, self._ref.ts, note)
        self._classic = SlackProgress(
            self._threads.web, self._ref.channel, self._ref.ts, self._run_id
        )
        await self._classic.begin()

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
