"""Typed progress events. The terminal and Slack are two reporters of the same events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from bot.trace import Trace
from bot.usage import Usage


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    tool: str
    language: str | None  # for run_code
    code: str  # the code, or a one-line summary of the input for the other tools
    detached: bool = False


@dataclass(frozen=True)
class ToolCallFinished:
    """The whole record of one call: what ran (as its start said) and how it ended."""

    call_id: str
    tool: str
    status: str  # ok | error | timeout | killed | running | invalid
    exit_code: int | None
    duration_s: float
    excerpt: str  # a short piece of stdout/stderr for display
    language: str | None = None  # for run_code
    code: str = ""  # the code, or a one-line summary of the input for the other tools


@dataclass(frozen=True)
class TextEmitted:
    text: str


@dataclass(frozen=True)
class ModelTurn:
    """One model response: its usage and cost (None: model not in the price table), and the
    model's context window (None: not looked up). A `compaction` turn summarised the
    conversation (the bot's own call, or the server's iteration): it is paid for, but its
    prompt is not the conversation's size."""

    turn: int
    usage: Usage
    cost_usd: float | None
    window: int | None = None
    purpose: Literal["answer", "compaction"] = "answer"


@dataclass(frozen=True)
class ContextTrimmed:
    """Older turns gave way so the conversation fits the model's context: `cleared` tool
    results became placeholders, or the conversation was `compacted` into a summary, by the
    bot or by the `server`. Token counts are estimates when the bot did it."""

    kind: Literal["cleared", "compacted"]
    by: Literal["bot", "server"]
    before_tokens: int
    after_tokens: int
    items: int = 0  # tool results cleared


@dataclass(frozen=True)
class RunFinished:
    """The answer, what it cost, and where its figures came from: each figure's step (None:
    printed by no step) and a note saying what holds ("" when it has no figures)."""

    answer: str
    turns: int
    usage: Usage
    cost_usd: float | None  # None: the model is not in the price table
    stop: str  # end_turn | max_turns | max_tokens | budget | ...
    budget_usd: float | None = None
    figures: tuple[Trace, ...] = ()
    figures_note: str = ""  # "12 figures, all traced to steps 2–4"
    notes_used: int = 0  # channel notes the answer says shaped it
    sandbox_wait_s: float = 0.0  # of the run's time, spent waiting for its sandbox to be made


@dataclass(frozen=True)
class RunFailed:
    reason: str  # safe to show to a user
    turns: int
    usage: Usage
    cost_usd: float | None
    # model: the model API failed after retries; sandbox: the sandbox failed; None: other
    cause: Literal["model", "sandbox"] | None = None


Event = (
    ToolCallStarted
    | ToolCallFinished
    | TextEmitted
    | ModelTurn
    | ContextTrimmed
    | RunFinished
    | RunFailed
)


class AgentView(Protocol):
    """Shows the model loop's events: a Slack thread, the terminal, or the audit on their way."""

    async def __call__(self, event: Event) -> None: ...


async def discard(event: Event) -> None:
    """A view that shows nothing."""
