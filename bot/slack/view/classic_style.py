"""A run in the classic style: a status line with a Stop button, one message per tool call
(edited in place when it finishes), then the answer. The run view decides what to show;
this style turns it into messages (payloads from the renderer, sent through the seam)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import Any

from bot.run_events import RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack.render import block_kit, wording
from bot.slack.web import SlackWeb

TICK_S = 5.0  # how often the elapsed time on the status line moves


class ClassicStyle:
    def __init__(self, web: SlackWeb, channel: str, thread_ts: str, run_id: str) -> None:
        self._web = web
        self._channel, self._thread_ts, self._run_id = channel, thread_ts, run_id
        self._started = time.monotonic()
        self._status_ts: str | None = None
        self._messages: dict[str, str] = {}  # call id -> its step's message
        self._ticker: asyncio.Task[None] | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    async def begin(self) -> bool:
        text, blocks = self._status(wording.WORKING, stoppable=True)
        self._status_ts = await self._web.post(self._channel, self._thread_ts, text, blocks)
        self._ticker = asyncio.create_task(self._tick())
        return True

    async def step_started(self, step: int, event: ToolCallStarted) -> None:
        text, blocks = block_kit.tool_started(step, event)
        ts = await self._web.post(self._channel, self._thread_ts, text, blocks)
        self._messages[event.call_id] = ts
        self._show(wording.WORKING, stoppable=True)

    async def step_finished(self, step: int, event: ToolCallFinished) -> None:
        ts = self._messages.get(event.call_id)  # None: started before a fall-back to classic
        if ts is not None:
            self._web.edits.edit(self._channel, ts, *block_kit.tool_finished(step, event))

    async def finished(self, event: RunFinished) -> None:
        await self._end(wording.DONE)
        # cleaned whole before it is cut into messages (a secret across a cut)
        event = dataclasses.replace(event, answer=self._web.clean.text(event.answer))
        # Show work and Notebook under a run that ran steps (here: since it went classic)
        run_id = self._run_id if self._messages else None
        for text, blocks in block_kit.answer_messages(event, self.elapsed_s, run_id):
            await self._web.post(self._channel, self._thread_ts, text, blocks)

    async def stopped(self, by: str | None) -> None:
        await self._end(wording.stopped_label(by))
        await self.say(wording.stopped(by))

    async def failed(self, message: str) -> None:
        await self._end(wording.FAILED)
        await self.say(wording.failed(message))

    async def say(self, text: str) -> None:
        await self._web.post(self._channel, self._thread_ts, *block_kit.note(text))

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
        mine = {*self._messages.values(), self._status_ts or ""}
        await self._web.edits.settle(mine)

    def _show(self, label: str, *, stoppable: bool) -> None:
        if self._status_ts is not None:
            text, blocks = self._status(label, stoppable=stoppable)
            self._web.edits.edit(self._channel, self._status_ts, text, blocks)

    def _status(self, label: str, *, stoppable: bool) -> tuple[str, list[dict[str, Any]]]:
        text = block_kit.status_line(label, len(self._messages), self.elapsed_s)
        return text, block_kit.status(text, run_id=self._run_id if stoppable else None)

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._show(wording.WORKING, stoppable=True)
