"""A run in Slack's agent style: the thread's status line ("is analyzing your data…",
naming the current step), then one streamed message holding a plan, with a task per file
that came with the question and per tool call, a Stop button, and at the end the answer,
its footer and feedback buttons. The stream starts with the first thing to show, so a run
that only answers is one plain message. A workspace that refuses streaming or status gets
the classic rendering instead (remembered per workspace, logged once)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from slack_sdk.errors import SlackApiError

from bot.agent.events import Event, RunFailed, RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack import render
from bot.slack.agent_threads import REFUSALS, AgentThreads
from bot.slack.live_message import Chunk, LiveMessage
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
        self._threads, self._ref, self._run_id = threads, ref, run_id
        self._started = time.monotonic()
        self._refresh_s = refresh_s
        self._steps: dict[str, int] = {}
        self._loading = ["Reading the question…"]
        self._live = LiveMessage(threads.poster, ref, user, on_wait=self.waiting)
        self._opening: list[Chunk] = []  # what the stream starts with, besides the plan
        self._classic: SlackProgress | None = None  # when the stream was refused mid-run
        self._refresher: asyncio.Task[None] | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    async def begin(self) -> bool:
        """Show the run; False when the workspace refuses (the caller draws it classic)."""
        showing = self._threads.status_showing(self._ref)
        if not showing and not await self._threads.set_status(self._ref, self._loading):
            return False
        self._opening = [note.task for note in self._threads.claim(self._ref.key)]
        self._refresher = asyncio.create_task(self._refresh())
        if self._opening:
            await self._show([])
        return True

    async def __call__(self, event: Event) -> None:
        if self._classic is not None:
            await self._classic(event)
            return
        match event:
            case ToolCallStarted():
                step = self._steps[event.call_id] = len(self._steps) + 1
                self._loading = [render.step_title(step, event)]
                await self._show([render.task_started(step, event)], event)
            case ToolCallFinished() if event.call_id in self._steps:
                await self._show([render.task_finished(event)], event)
            case RunFinished():
                await self._end()
                footer = render.context(render.footer(event, self.elapsed_s))
                blocks = [footer, render.feedback(self._run_id)]
                await self._live.finish(event.answer or "_(no answer)_", blocks)
            case RunFailed():
                await self.failed(event.reason)

    async def stopped(self, by: str | None) -> None:
        if self._classic is not None:
            await self._classic.stopped(by)
            return
        who = f" by <@{by}>" if by else ""
        await self._end()
        await self._live.finish(f":octagonal_sign: Stopped{who}. Ask again when you are ready.", [])

    async def failed(self, message: str) -> None:
        if self._classic is not None:
            await self._classic.failed(message)
            return
        await self._end()
        await self._live.finish(f":warning: {message}", [])

    async def waiting(self, wait_s: float) -> None:
        """Slack's rate limits hold a call back: say so in the status while it waits."""
        note = f"Waiting about {wait_s:.0f}s for Slack (this workspace is busy)…"
        await self._threads.set_status(self._ref, [note, *self._loading])

    async def _show(self, chunks: list[Chunk], event: Event | None = None) -> None:
        """Into the stream; the first change starts it. `event`: what the chunks show."""
        if self._live.ts is not None:
            self._live.add(chunks)
            return
        plan = [{"type": "plan_update", "title": PLAN_TITLE}, *self._opening, *chunks]
        stop = {"type": "blocks", "blocks": [render.stop_button(self._run_id)]}
        try:
            await self._live.start([*plan, stop])
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error not in REFUSALS:
                raise
            self._threads.refuse(self._ref.team, error)
            await self._go_classic(event)

    async def _go_classic(self, event: Event | None) -> None:
        """The stream was refused after the status was not: the rest of the run in
        classic messages."""
        self._classic = SlackProgress(
            self._threads.poster, self._ref.channel, self._ref.ts, self._run_id
        )
        await self._classic.begin()
        if event is not None:
            await self._classic(event)

    async def _end(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        if self._threads.status_showing(self._ref) and self._live.ts is not None:
            await self._threads.clear_status(self._ref)  # else the reply to come clears it

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            await self._threads.set_status(self._ref, self._loading)
