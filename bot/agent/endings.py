"""How a run ends: the model's last word, a limit reached, a refusal, a full window.

The notes here are the loop's own words to the model or to the reader; `OWN_NOTES` lists
every text the loop writes itself, so the figure check never takes one for a step's output
or the question.
"""

from __future__ import annotations

from anthropic.types import Message

from bot.agent.keeper import GO_ON_NOTE
from bot.agent.tool_calls import TRUNCATED_CALL_NOTE
from bot.agent.totals import RunTotals
from bot.run_events import RunFailed

LAST_TURN_NOTE = (
    "This is your last turn: do not call any more tools. Write your answer now from what "
    "you have, and say what is still unfinished."
)
FULL_WINDOW_NOTE = (
    "This conversation has filled the model's context window, even summarised. Start a new "
    "conversation to go on (attach the files there again)."
)
TERMINAL_STOPS = {"end_turn", "stop_sequence"}
FULL_STOPS = {"model_context_window_exceeded"}
ENDED_UNRUN = "The turn ended before this call ran."
LIMIT_UNRUN = "The turn limit was reached before this call ran."
BUDGET_UNRUN = "The run's budget was spent before this call ran."
# Texts the loop writes itself: no step's output, and no question.
OWN_NOTES = (
    LAST_TURN_NOTE,
    GO_ON_NOTE,
    TRUNCATED_CALL_NOTE,
    ENDED_UNRUN,
    LIMIT_UNRUN,
    BUDGET_UNRUN,
)


def limit_reached(run: RunTotals, max_turns: int) -> tuple[str, str] | None:
    """The stop reason and the note for unrun calls, once the turn limit or budget is
    reached; None while the run may go on."""
    if run.turns >= max_turns:
        return "max_turns", LIMIT_UNRUN
    if run.over_budget:
        return "budget", BUDGET_UNRUN
    return None


def has_room(run: RunTotals, max_turns: int) -> bool:
    """Whether one more turn fits the run's turn limit and budget."""
    return run.turns < max_turns and not run.over_budget


def closing(answer: str, stop: str, run: RunTotals) -> str:
    """The answer as the reader sees it: with a line saying why it ended early, if it did."""
    if stop == "max_tokens":
        return answer + "\n\n_(The answer was cut at the output token limit.)_"
    if stop == "model_context_window_exceeded":
        note = f"_({FULL_WINDOW_NOTE})_"
    elif stop == "budget":
        note = f"_(Stopped at this run's budget of ${run.budget_usd:.2f}.)_"
    elif stop == "max_turns":
        note = (
            f"_(Stopped after {run.turns} turns, the limit per request. "
            "Ask a follow-up to continue.)_"
        )
    else:
        return answer
    return (answer + "\n\n" if answer else "") + note


def refusal(run: RunTotals, message: Message) -> RunFailed:
    """The model declined: the run fails with its explanation, if it gave one."""
    details = getattr(message, "stop_details", None)
    why = getattr(details, "explanation", None) if details else None
    reason = "The model declined this request."
    return RunFailed(f"{reason} {why}" if why else reason, run.turns, run.usage, run.cost)
