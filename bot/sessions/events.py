"""What the engine tells a front end about a thread, beside the agent's own events.

A front end renders these for one thread: `ViewFor(key)` gives the view for a thread,
and the engine asks for a fresh one at the start of every run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from bot.run_events import Event
from bot.sessions.outputs import OutputFile

Outputs = Callable[[], AsyncIterator[OutputFile]]


@dataclass(frozen=True)
class RunStarted:
    run_id: str  # what a Stop button names
    question: str
    budget_usd: float
    user: str = ""  # who asked (the last of the questions joined into this run)


@dataclass(frozen=True)
class OutputsReady:
    """The run ended with an answer or a model failure; `files()` streams report.md and
    out/ (safe names, within the output caps), for the front end to save or post."""

    files: Outputs


@dataclass(frozen=True)
class RunStopped:
    by: str | None  # who pressed Stop, when known


@dataclass(frozen=True)
class RunInterrupted:
    # shutdown: this process is stopping; restart: a crash cut the run off before a start;
    # retried: another replica cut it off, and its question is asked again here.
    why: Literal["shutdown", "restart", "retried"]


@dataclass(frozen=True)
class BudgetSpent:
    """No run: the thread's or the user's day's budget is used up."""

    scope: Literal["thread", "user"]
    spent_usd: float
    limit_usd: float
    continue_usd: float  # what a Continue adds (thread budgets only; 0 for users)


@dataclass(frozen=True)
class SandboxSuspended:
    """The thread went quiet and its sandbox was shut down; it resumes on the next question.
    `kept_s`: the sandbox was stopped, not deleted, and is kept (files and all) this long.
    `for_room`: before its idle timeout, for another thread (MAX_SANDBOXES were live)."""

    kept_s: float = 0.0
    for_room: bool = False
    snapshot: bool = False  # its disk was kept as a snapshot: files come back as they were


@dataclass(frozen=True)
class SandboxWaiting:
    """The run waits for a sandbox: the bot runs `limit` (MAX_SANDBOXES) already."""

    limit: int


SessionEvent = (
    Event
    | RunStarted
    | OutputsReady
    | RunStopped
    | RunInterrupted
    | BudgetSpent
    | SandboxSuspended
    | SandboxWaiting
)


class RunView(Protocol):
    """Shows a whole run: the engine's events as well as the model loop's (`AgentView`)."""

    async def __call__(self, event: SessionEvent) -> None: ...


ViewFor = Callable[[str], RunView]
# Hears every event a view is shown, before it (metrics); one per view.
Observer = Callable[[SessionEvent], None]
