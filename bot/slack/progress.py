"""A run as the thread shows it: a status line with a Stop button, one message per tool
call (edited in place when it finishes), then the answer."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time

from bot.agent.events import (
    Event,
    RunFailed,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from bot.slack import render
from bot.slack.web import SlackWeb

TICK_S = 5.0  # how often the elapsed time on the status line moves


class SlackProgress:
    def __init__(self, web: SlackWeb, channel: str, thread_ts: str, run_id: str) -> None:
        self._web = web
        self._channel, self._thread_ts, self._run_id = channel, thread_ts, run_id
        self._started = time.monotonic()
        self._status_ts: str | None = None
        self._steps: dict[str, tuple[int, str, ToolCallStarted]] = {}
        self._ticker: asyncio.Task[None] | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    async def begin(self) -> None:
        text, blocks = self._status(":gear: Working on it…", stoppable=True)
        self._status_ts = await self._web.post(self._channel, self._thread_ts, text, blocks)
        self._ticker = asyncio.create_task(self._tick())

    async def __call__(self, event: Event) -> None:
        match event:
            case ToolCallStarted():
                step = len(self._steps) + 1
                text, blocks = render.tool_started(step, event)
                ts = await self._web.post(self._channel, self._thread_ts, text, blocks)
                self._steps[event.call_id] = (step, ts, event)
                self._show(":gear: Working on it…", stoppable=True)
            case ToolCallFinished() if event.call_id in self._steps:
                step, ts, started = self._steps[event.call_id]
                text, blocks = render.tool_finished(step, started, event)
                self._web.edits.edit(self._channel, ts, text, blocks)
            case RunFinished():
                await self._end(":white_check_mark: Done")
                # cleaned whole before it is cut into messages (a secret across a cut)
                event = dataclasses.replace(event, answer=self._web.clean.text(event.answer))
                for text, blocks in render.answer_messages(event, self.elapsed_s):
                    await self._web.post(self._channel, self._thread_ts, text, blocks)
            case RunFailed():
                await self._end(":warning: Failed")
                await self.say(f":warning: {event.reason}")

    async def stopped(self, by: str | None) -> None:
        who = f" by <@{by}>" if by else ""
        await self._end(f":octagonal_sign: Stopped{who}")
        await self.say(f":octagonal_sign: Stopped{who}. Ask again when you are ready.")

    async def failed(self, message: str) -> None:
        await self._end(":warning: Failed")
        await self.say(f":warning: {message}")

    async def say(self, text: str) -> None:
        await self._web.post(self._channel, self._thread_ts, text, [render.section(text)])

    def abandon(self) -> None:
        """The channel is gone: stop the ticker, with no further call to Slack."""
        if self._ticker is not None:
            self._ticker.cancel()

    async def _end(self, label: str) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._ticker
        self._show(label, stoppable=False)
        mine = {ts for _, ts, _ in self._steps.values()} | {self._status_ts or ""}
        await self._web.edits.settle(mine)

    def _show(self, label: str, *, stoppable: bool) -> None:
        if self._status_ts is not None:
            text, blocks = self._status(label, stoppable=stoppable)
            self._web.edits.edit(self._channel, self._status_ts, text, blocks)

    def _status(self, label: str, *, stoppable: bool) -> tuple[str, list[dict]]:
        steps = len(self._steps)
        text = f"{label} · {steps} step{'s' if steps != 1 else ''} · {self.elapsed_s:.0f}s"
        return text, render.status(text, run_id=self._run_id if stoppable else None)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._show(":gear: Working on it…", stoppable=True)
