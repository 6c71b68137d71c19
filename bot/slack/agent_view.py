"""A run in Slack's agent style: the thread's status line at once ("is analyzing your
data…", naming the current step), one streamed message holding a plan with a task per tool
call and then the answer, a small message with the Stop button while the run goes, and
feedback buttons under the answer. A workspace that refuses streaming or status gets the
classic rendering instead (remembered per workspace, logged once)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from slack_sdk.errors import SlackApiError

from bot.agent.events import Event, RunFailed, RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack import render
from bot.slack.live_message import LiveMessage
from bot.slack.poster import SlackPoster
from bot.slack.threads import ThreadRef

log = logging.getLogger(__name__)

STATUS = "is analyzing your data…"
STATUS_REFRESH_S = 90.0  # Slack clears a status after 2 minutes without a message
# What a workspace without the feature (or the scopes) answers.
REFUSALS = frozenset(
    {
        "not_allowed_token_type",
        "missing_scope",
        "feature_not_enabled",
        "not_allowed",
        "unknown_method",
        "method_not_supported_for_channel_type",
        "team_not_allowed",
    }
)


class AgentSupport:
    """The workspaces (team ids) that refused streaming or status in this process."""

    def __init__(self) -> None:
        self._refused: set[str] = set()

    def allowed(self, team: str) -> bool:
        return team not in self._refused

    def refuse(self, team: str, error: str) -> None:
        if team not in self._refused:
            self._refused.add(team)
            log.warning("workspace %s refused streaming or status (%s); classic view", team, error)


class AgentRun:
    def __init__(
        self, poster: SlackPoster, ref: ThreadRef, run_id: str, user: str, support: AgentSupport
    ) -> None:
        self._poster, self._ref, self._run_id = poster, ref, run_id
        self._user, self._support = user, support
        self._started = time.monotonic()
        self._steps: dict[str, int] = {}
        self._loading = ["Reading the question…"]
        self._message: LiveMessage | None = None
        self._stop_ts: str | None = None
        self._refresher: asyncio.Task[None] | None = None

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    async def begin(self) -> bool:
        """Show the run; False when the workspace refuses (the caller draws it classic)."""
        try:
            await self._status(STATUS, strict=True)
            ts = await self._poster.start_stream(
                self._ref.channel,
                self._ref.ts,
                (self._user, self._ref.team),
                [{"type": "plan_update", "title": "Working on it"}],
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error not in REFUSALS:
                raise
            self._support.refuse(self._ref.team, error)
            with contextlib.suppress(SlackApiError):
                await self._poster.set_status(self._ref.channel, self._ref.ts, "")
            return False
        self._message = LiveMessage(self._poster, self._ref.channel, self._ref.ts, ts)
        text, blocks = self._stop_line(":gear: Working on it…", stoppable=True)
        self._stop_ts = await self._poster.post(self._ref.channel, self._ref.ts, text, blocks)
        await self._status(STATUS)  # the posts above cleared it
        self._refresher = asyncio.create_task(self._refresh())
        return True

    async def __call__(self, event: Event) -> None:
        match event:
            case ToolCallStarted():
                step = self._steps[event.call_id] = len(self._steps) + 1
                await self._live.update([render.task_started(step, event)])
                self._loading = [render.step_title(step, event)]
                await self._status(STATUS)
            case ToolCallFinished() if event.call_id in self._steps:
                await self._live.update([render.task_finished(event)])
            case RunFinished():
                await self._end(":white_check_mark: Done")
                footer = render.context(render.footer(event, self.elapsed_s))
                await self._live.write(event.answer or "_(no answer)_")
                await self._live.finish([footer, render.feedback(self._run_id)])
            case RunFailed():
                await self.failed(event.reason)

    async def stopped(self, by: str | None) -> None:
        who = f" by <@{by}>" if by else ""
        await self._end(f":octagonal_sign: Stopped{who}")
        await self._live.write(f"\n\n:octagonal_sign: Stopped{who}. Ask again when you are ready.")
        await self._live.finish([])

    async def failed(self, message: str) -> None:
        await self._end(":warning: Failed")
        await self._live.write(f"\n\n:warning: {message}")
        await self._live.finish([])

    @property
    def _live(self) -> LiveMessage:
        assert self._message is not None, "run events come after begin()"
        return self._message

    async def _end(self, label: str) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        await self._status("")
        if self._stop_ts is not None:
            text, blocks = self._stop_line(label, stoppable=False)
            self._poster.edit(self._ref.channel, self._stop_ts, text, blocks)
            await self._poster.settle({self._stop_ts})

    def _stop_line(self, label: str, *, stoppable: bool) -> tuple[str, list[dict]]:
        steps = len(self._steps)
        text = f"{label} · {steps} step{'s' if steps != 1 else ''} · {self.elapsed_s:.0f}s"
        return text, render.status(text, run_id=self._run_id if stoppable else None)

    async def _status(self, status: str, *, strict: bool = False) -> None:
        """Set the thread's status; best effort once the run is shown."""
        try:
            loading = self._loading if status else None
            await self._poster.set_status(self._ref.channel, self._ref.ts, status, loading)
        except SlackApiError as exc:
            if strict:
                raise
            log.warning("could not set the thread status: %s", exc.response.get("error"))

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(STATUS_REFRESH_S)
            await self._status(STATUS)
