"""How a thread shows what the engine reports: one `SlackView` per run (the engine asks for a
fresh one each time), drawing the run's progress, answer, files and notes.

When Slack says the bot is no longer in the channel (someone removed it, or the channel was
archived), nothing more can be shown there: the view says so once in the log, stops its
background edits, and stops the run (no one would see it go on)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from bot.agent.events import ContextTrimmed, RunFailed, RunFinished
from bot.errors import BotError
from bot.sessions.events import (
    BudgetSpent,
    Outputs,
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
from bot.slack import render
from bot.slack.agent_threads import AgentThreads
from bot.slack.agent_view import AgentRun
from bot.slack.errors import SlackGone
from bot.slack.progress import SlackProgress
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb

log = logging.getLogger(__name__)

OUTPUT_MAX_BYTES = 50 << 20
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
SHUTDOWN_NOTE = (
    "The bot is restarting, so this run was interrupted. Reply here (for example "
    '"continue") in a minute to pick it up; the conversation and files are kept.'
)
INTERRUPTED_NOTE = (
    ":warning: The bot restarted while working on this thread, so that work was "
    'interrupted. Reply here (for example "continue") to pick it up; the conversation '
    "and files are kept."
)
IDLE_NOTE = (
    ":zzz: This thread was quiet, so its sandbox was shut down. Write here again to "
    "pick up where we left off: the files will be loaded again."
)
STOPPED_NOTE = (
    ":zzz: This thread was quiet, so its sandbox was stopped; its files are kept for "
    "{kept}. Write here again to pick up where we left off."
)
WAITING_NOTE = (
    ":hourglass_flowing_sand: All {limit} sandboxes this bot may run at once are in use, so "
    "this question waits its turn; it goes on as soon as one is free (Stop cancels it)."
)


COMPACTED_NOTE = (
    ":card_index_dividers: This thread has grown long, so its earlier steps were summarised to "
    "fit the model's context. The figures found so far, the files and the kernel's variables "
    "are kept."
)


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif")


def _upload(name: str, content: bytes) -> dict[str, object]:
    """One file for files_upload_v2; an image gets alt text, so it shows inline and is
    described to screen readers."""
    upload: dict[str, object] = {"content": content, "filename": name, "title": name}
    if name.lower().endswith(IMAGE_SUFFIXES):
        upload["alt_txt"] = f"Chart from the analysis: {name.rsplit('.', 1)[0]}"
    return upload


class ChannelGone(BotError):
    """The bot can no longer post in the thread's channel."""


def _span(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{round(seconds / 3600)} hours"
    return f"{max(1, round(seconds / 60))} minutes"


async def ignore(event: SessionEvent) -> None:
    """The view of a key that is not a Slack thread."""


Asker = Callable[[str], Awaitable[str]]  # run id -> who asked (a Slack user id, or "")


async def nobody(run_id: str) -> str:
    return ""


def views(
    web: SlackWeb,
    continue_usd: float,
    *,
    agent: AgentThreads | None = None,
    asker: Asker = nobody,
) -> ViewFor:
    """The engine's `view_for`: a fresh view per run for Slack threads, none for others.
    `continue_usd`: what a Continue button adds; `agent`: Slack's agent style (streamed
    message, thread status), else the classic messages; `asker`: whom a stream is for."""

    def view_for(key: str) -> RunView:
        ref = ThreadRef.parse(key)
        return SlackView(web, ref, continue_usd, agent, asker) if ref else ignore

    return view_for


class SlackView:
    def __init__(
        self,
        web: SlackWeb,
        ref: ThreadRef,
        continue_usd: float,
        agent: AgentThreads | None = None,
        asker: Asker = nobody,
    ) -> None:
        self._web = web
        self._ref = ref
        self._continue_usd = continue_usd
        self._agent, self._asker = agent, asker
        self._progress: SlackProgress | AgentRun | None = None
        self._finished: RunFinished | None = None
        self._run_id = ""
        self._gone = False  # Slack said the bot is not in the channel

    async def __call__(self, event: SessionEvent) -> None:
        if self._gone:
            return
        try:
            await self._show(event)
        except SlackGone as exc:
            error = exc.code
            self._lose_channel(error)
            if not isinstance(event, LAST_WORDS):
                raise ChannelGone(f"I can no longer post in this channel ({error}).") from None

    def _lose_channel(self, error: str) -> None:
        self._gone = True
        if self._progress is not None:
            self._progress.abandon()
        log.warning(
            "Slack answered %s for channel %s: the bot is not in it (any more), so the work in "
            "thread %s stops here. Invite the bot back to the channel to go on.",
            error, self._ref.channel, self._ref.ts,
        )  # fmt: skip

    async def _show(self, event: SessionEvent) -> None:
        match event:
            case RunStarted():
                self._run_id = event.run_id
                self._progress = await self._begin(event.run_id)
            case OutputsReady():
                await self._outputs(event.files)
            case RunStopped():
                await self._run.stopped(event.by)
            case RunInterrupted(why="shutdown"):
                await self._run.failed(SHUTDOWN_NOTE)
            case RunInterrupted():
                await self._say(INTERRUPTED_NOTE)
            case BudgetSpent():
                await self._release_held()
                await self._budget_spent(event)
            case SandboxWaiting(limit=limit):
                await self._say(WAITING_NOTE.format(limit=limit))
            case ContextTrimmed(kind="compacted"):
                await self._say(COMPACTED_NOTE)
            case SandboxSuspended(kept_s=kept_s):
                await self._say(STOPPED_NOTE.format(kept=_span(kept_s)) if kept_s else IDLE_NOTE)
            case RunFinished():
                self._finished = event
                await self._run(event)
            case _:
                await self._run(event)

    async def _begin(self, run_id: str) -> SlackProgress | AgentRun:
        """The agent style where the workspace allows it, else the classic one."""
        if self._agent is not None and self._agent.allowed(self._ref.team):
            user = await self._asker(run_id)
            run = AgentRun(self._agent, self._ref, run_id, user)
            if await run.begin():
                return run
        progress = SlackProgress(self._web, self._ref.channel, self._ref.ts, run_id)
        await progress.begin()
        return progress

    @property
    def _run(self) -> SlackProgress | AgentRun:
        assert self._progress is not None, "run events come after RunStarted"
        return self._progress

    async def _release_held(self) -> None:
        """Notes on files held for a run that will not come: posted as they are."""
        for note in self._agent.claim(self._ref.key) if self._agent else []:
            await self._say(note.text)

    async def _say(self, text: str, blocks: list[dict] | None = None) -> None:
        await self._web.post(self._ref.channel, self._ref.ts, text, blocks)

    async def _outputs(self, files: Outputs) -> None:
        """After an answer: report.md and the charts as files, then any budget note."""
        if self._finished is None:
            return  # a failed run's half-made files are not shared
        uploads = []
        async for name, chunks in files():
            data = bytearray()
            async for chunk in chunks:
                data += chunk
                if len(data) > OUTPUT_MAX_BYTES:
                    break
            if len(data) <= OUTPUT_MAX_BYTES:
                uploads.append(_upload(name, bytes(data)))
        agent = isinstance(self._progress, AgentRun)  # its one message says enough
        if not agent and not any(u["filename"] == "report.md" for u in uploads):
            await self._say("_No report.md was written this time._")
        if uploads:
            run = self._progress if isinstance(self._progress, AgentRun) else None
            waiting = run.waiting if run else None
            await self._web.upload(self._ref.channel, self._ref.ts, uploads, waiting)
            if run is not None:
                await run.uploaded()
        if self._finished.stop == "budget":
            note = f"I stopped at this run's budget of ${self._finished.budget_usd or 0:.2f}."
            blocks = render.continue_button(
                note, self._ref.key, self._continue_usd, f"run:{self._run_id}"
            )
            await self._say(note, blocks)

    async def _budget_spent(self, event: BudgetSpent) -> None:
        if event.scope == "user":
            await self._say(
                f":moneybag: You have used ${event.spent_usd:.2f} of your "
                f"${event.limit_usd:.2f} for today; try again tomorrow."
            )
            return
        note = (
            f":moneybag: This thread has used ${event.spent_usd:.2f} of its "
            f"${event.limit_usd:.2f} budget."
        )
        grant_id = f"spent:{secrets.token_hex(8)}"  # no run: this button's own
        blocks = render.continue_button(note, self._ref.key, event.continue_usd, grant_id)
        await self._say(note, blocks)
