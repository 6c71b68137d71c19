"""How a thread shows one run: a `SlackRunView` per run (the engine asks for a fresh one
each time), a small state machine that owns what the run has shown so far and decides what
to send next. It asks the renderer (render.py, wording.py) for payloads, a style for how the
run looks (AssistantStyle: the assistant style's streamed message; ClassicStyle: messages per
step), and the seam (web.py) to send them.

    not started ─▶ streaming ─▶ finished | stopped | failed
         │             └──────▶ classic (the stream refused) ─▶ finished | stopped | failed
         └──────────────────▶ classic (no assistant style here)

Where the workspace has agent sessions (agent_sessions.py), the thread's session is
`processing` while a run goes, whatever the style (the stop button is Slack's), `active`
once it has ended however it ended, and `closed` when the thread's sandbox is shut down
for idleness.

When Slack says the bot is no longer in the channel (someone removed it, or the channel was
archived), nothing more can be shown there: the view says so once in the log, stops its
background work, and stops the run (no one would see it go on)."""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import Any

from bot.errors import BotError
from bot.run_events import (
    ContextTrimmed,
    RunFailed,
    RunFinished,
    ToolCallFinished,
    ToolCallStarted,
)
from bot.sessions.events import (
    BudgetSpent,
    OutputsReady,
    RunInterrupted,
    RunStarted,
    RunStopped,
    RunView,
    SandboxSuspended,
    SandboxWaiting,
    SessionEvent,
    ViewFor,
)
from bot.slack.render import wording
from bot.slack.threads import ThreadRef
from bot.slack.view.agent_sessions import ACTIVE, CLOSED, PROCESSING, AgentSessions
from bot.slack.view.assistant_style import AssistantStyle
from bot.slack.view.assistant_threads import AssistantThreads
from bot.slack.view.classic_style import ClassicStyle
from bot.slack.view.note_proposals import NoteProposals
from bot.slack.view.results import split_answer
from bot.slack.view.run_extras import DataSurfaces, RunExtras
from bot.slack.view.schedule_proposals import ScheduleProposals
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackGone

log = logging.getLogger(__name__)

# After these the run is over (or there was none): the session is no longer processing.
RUN_OVER = (RunFinished, RunFailed, RunStopped, RunInterrupted, BudgetSpent)
# After these there is nothing left to stop: a gone channel only means they go unseen.
LAST_WORDS = (
    RunFinished,
    RunFailed,
    RunStopped,
    RunInterrupted,
    OutputsReady,
    BudgetSpent,
    SandboxSuspended,
)


class Phase(enum.Enum):
    NOT_STARTED = "not started"
    STREAMING = "streaming"  # the assistant style's message
    CLASSIC = "classic"  # messages per step: from the start, or fallen back
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"


class ChannelGone(BotError):
    """The bot can no longer post in the thread's channel."""


async def ignore(event: SessionEvent) -> None:
    """The view of a key that is not a Slack thread."""


def views(
    web: SlackWeb,
    continue_usd: float,
    *,
    assistant: AssistantThreads | None = None,
    sessions: AgentSessions | None = None,
    data: DataSurfaces | None = None,
    schedules: ScheduleProposals | None = None,
    notes: NoteProposals | None = None,
) -> ViewFor:
    """The engine's `view_for`: a fresh view per run for Slack threads, none for others.
    `continue_usd`: what a Continue button adds; `assistant`: Slack's assistant style (streamed
    message, thread status), else the classic messages; `sessions`: Slack's agent
    sessions, where the workspace has them; `data`: how answers show their tables,
    charts and report (None: as text and files); `schedules`: where a proposed schedule is
    shown (None: nowhere)."""

    def view_for(key: str) -> RunView:
        ref = ThreadRef.parse(key)
        if ref is None:
            return ignore
        return SlackRunView(
            web, ref, continue_usd, assistant, sessions=sessions, data=data, schedules=schedules,
            notes=notes,
        )  # fmt: skip

    return view_for


class SlackRunView:
    def __init__(
        self,
        web: SlackWeb,
        ref: ThreadRef,
        continue_usd: float,
        assistant: AssistantThreads | None = None,
        *,
        refresh_s: float | None = None,
        sessions: AgentSessions | None = None,
        data: DataSurfaces | None = None,
        schedules: ScheduleProposals | None = None,
        notes: NoteProposals | None = None,
    ) -> None:
        self._schedules, self._notes, self._asker = schedules, notes, ""
        self._web, self._ref, self._assistant, self._sessions = web, ref, assistant, sessions
        self._refresh_s = refresh_s  # the agent status's refresh (tests make it short)
        self.phase = Phase.NOT_STARTED
        self._style: AssistantStyle | ClassicStyle | None = None
        self._streamed: AssistantStyle | None = None  # the assistant style, even once fallen back
        self._steps: dict[str, int] = {}  # call id -> its step number
        self._extras = RunExtras(web, ref, continue_usd, assistant, data)
        self._data = data
        self._gone = False  # Slack said the bot is not in the channel

    async def __call__(self, event: SessionEvent) -> None:
        if self._gone:
            return
        try:
            await self._show(event)
        except SlackGone as exc:
            self._lose_channel(exc.code)
            if not isinstance(event, LAST_WORDS):
                raise ChannelGone(wording.channel_gone(exc.code)) from None
        finally:  # a run that failed to show is still over for the session
            if not self._gone:
                await self._move_session(event)

    def _lose_channel(self, error: str) -> None:
        self._gone = True
        for style in {s for s in (self._style, self._streamed) if s is not None}:
            style.abandon()
        log.warning(
            "Slack answered %s for channel %s: the bot is not in it (any more), so the work in "
            "thread %s stops here. Invite the bot back to the channel to go on.",
            error, self._ref.channel, self._ref.ts,
        )  # fmt: skip

    async def _show(self, event: SessionEvent) -> None:
        match event:
            case RunStarted():
                await self._begin(event)
            case OutputsReady():
                await self._extras.outputs(event.files, self._streamed)
            case RunStopped() if self._style is None:  # stopped before its run started
                self.phase = Phase.STOPPED
                await self._extras.stopped_before_start(event.by)
            case RunStopped():
                self.phase = Phase.STOPPED
                await self._run.stopped(event.by)
            case RunInterrupted(why="shutdown"):
                self.phase = Phase.FAILED
                await self._run.failed(wording.SHUTDOWN)
            case RunInterrupted(why="retried"):
                await self._extras.say(wording.RETRIED)
            case RunInterrupted():
                await self._extras.say(wording.INTERRUPTED)
            case BudgetSpent():
                await self._extras.budget_spent(event)
            case SandboxWaiting(limit=limit):
                await self._extras.say(wording.WAITING.format(limit=limit))
            case ContextTrimmed(kind="compacted"):
                await self._extras.say(wording.COMPACTED)
            case SandboxSuspended(kept_s=kept_s, for_room=for_room, snapshot=snapshot):
                await self._extras.say(wording.suspended(kept_s, for_room, snapshot=snapshot))
            case _:
                await self._agent_event(event)

    async def _move_session(self, event: SessionEvent) -> None:
        """The session's status once the run is over, or its sandbox gone (the stream's
        stop may have moved it already)."""
        sessions = self._sessions
        if sessions is None:
            return
        if isinstance(event, RUN_OVER) and sessions.status(self._ref) != ACTIVE:
            await sessions.set(self._ref, ACTIVE)
        elif isinstance(event, SandboxSuspended):
            await sessions.set(self._ref, CLOSED)

    async def _begin(self, event: RunStarted) -> None:
        """The assistant style where the workspace allows it, else the classic one; the
        session (if any) shows the run going, from here or from the question's arrival."""
        self._extras.run_id, self._asker = event.run_id, event.user
        sessions = self._sessions
        if sessions is not None and sessions.status(self._ref) != PROCESSING:
            await sessions.set(self._ref, PROCESSING)
        if self._assistant is not None and self._assistant.allowed(self._ref.team):
            extra: dict[str, Any] = {"refresh_s": self._refresh_s} if self._refresh_s else {}
            assistant = AssistantStyle(
                self._assistant, self._ref, event.run_id, event.user, sessions=sessions, **extra
            )
            if await assistant.begin():
                self._style = self._streamed = assistant
                self.phase = Phase.STREAMING
                return
        await self._classic(event.run_id)

    async def _classic(self, run_id: str) -> None:
        self._style = ClassicStyle(self._web, self._ref.channel, self._ref.ts, run_id)
        self.phase = Phase.CLASSIC
        await self._style.begin()

    async def _agent_event(self, event: SessionEvent) -> None:
        run = self._run
        if self.phase is Phase.STREAMING and self._streamed is not None:
            if self._streamed.gone is not None:  # the bot left the channel: stop the run
                raise self._streamed.gone
            if self._streamed.refused:
                await self._fall_back(self._streamed)
                run = self._run
        match event:
            case ToolCallStarted():
                step = self._steps[event.call_id] = len(self._steps) + 1
                await run.step_started(step, event)
            case ToolCallFinished() if event.call_id in self._steps:
                await run.step_finished(self._steps[event.call_id], event)
                await self._proposal(event)
            case RunFinished():
                self.phase = Phase.FINISHED
                self._extras.finished = event
                if self._data is not None:  # its tables are shown as tables, under it
                    answer, self._extras.answer_tables = split_answer(event.answer)
                    event = dataclasses.replace(event, answer=answer)
                await run.finished(event)
            case RunFailed():
                self.phase = Phase.FAILED
                await run.failed(event.reason)

    async def _proposal(self, event: ToolCallFinished) -> None:
        """What the model proposed (a schedule, a channel note), shown to the asker."""
        if event.status != "ok":
            return
        if event.tool == "schedule_run" and self._schedules is not None:
            await self._schedules.propose(self._ref, self._asker, self._extras.run_id, event.code)
        elif event.tool == "propose_note" and self._notes is not None:
            await self._notes.propose(self._ref, self._asker, event.code)

    async def _fall_back(self, assistant: AssistantStyle) -> None:
        """The stream was refused after the status was not: the rest of the run in
        classic messages, after the notes on its files."""
        assistant.abandon()
        for note in assistant.notes:
            await self._web.post(self._ref.channel, self._ref.ts, note)
        await self._classic(self._extras.run_id)

    @property
    def _run(self) -> AssistantStyle | ClassicStyle:
        assert self._style is not None, "run events come after RunStarted"
        return self._style
