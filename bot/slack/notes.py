"""What the bot says in a thread, in words: the listeners' short answers, and a run's notes
on restarts, idle sandboxes, waits, budgets, stops and failures. Pure text (the payloads
are `render.py`'s)."""

from __future__ import annotations

RESTARTING = "I'm restarting; try again in a minute."
RUN_ENDED = "That run has already ended."
CONTINUE_USED = "That Continue was used already."
WHAT_NEXT = "What would you like me to find out?"
READING_QUESTION = "Reading the question…"


def reading(name: str) -> str:
    return f"Reading {name}…"


SHUTDOWN = (
    "The bot is restarting, so this run was interrupted. Reply here (for example "
    '"continue") in a minute to pick it up; the conversation and files are kept.'
)
INTERRUPTED = (
    ":warning: The bot restarted while working on this thread, so that work was "
    'interrupted. Reply here (for example "continue") to pick it up; the conversation '
    "and files are kept."
)
IDLE = (
    ":zzz: This thread was quiet, so its sandbox was shut down. Write here again to "
    "pick up where we left off: the files will be loaded again."
)
STOPPED_SANDBOX = (
    ":zzz: This thread was quiet, so its sandbox was stopped; its files are kept for "
    "{kept}. Write here again to pick up where we left off."
)
WAITING = (
    ":hourglass_flowing_sand: All {limit} sandboxes this bot may run at once are in use, so "
    "this question waits its turn; it goes on as soon as one is free (Stop cancels it)."
)
COMPACTED = (
    ":card_index_dividers: This thread has grown long, so its earlier steps were summarised to "
    "fit the model's context. The figures found so far, the files and the kernel's variables "
    "are kept."
)
NO_REPORT = "_No report.md was written this time._"
NO_ANSWER = "_(no answer)_"
WORKING = ":gear: Working on it…"
DONE = ":white_check_mark: Done"
FAILED = ":warning: Failed"


def span(seconds: float) -> str:
    if seconds >= 2 * 3600:
        return f"{round(seconds / 3600)} hours"
    return f"{max(1, round(seconds / 60))} minutes"


def suspended(kept_s: float) -> str:
    return STOPPED_SANDBOX.format(kept=span(kept_s)) if kept_s else IDLE


def failed(reason: str) -> str:
    return f":warning: {reason}"


def stopped_label(by: str | None) -> str:
    return f":octagonal_sign: Stopped{f' by <@{by}>' if by else ''}"


def stopped(by: str | None) -> str:
    return f"{stopped_label(by)}. Ask again when you are ready."


def budget_stop(budget_usd: float | None) -> str:
    return f"I stopped at this run's budget of ${budget_usd or 0:.2f}."


def user_budget(spent_usd: float, limit_usd: float) -> str:
    return (
        f":moneybag: You have used ${spent_usd:.2f} of your ${limit_usd:.2f} for today; "
        "try again tomorrow."
    )


def thread_budget(spent_usd: float, limit_usd: float) -> str:
    return f":moneybag: This thread has used ${spent_usd:.2f} of its ${limit_usd:.2f} budget."


def slack_wait(wait_s: float) -> str:
    return f"Waiting about {wait_s:.0f}s for Slack (this workspace is busy)…"


def channel_gone(error: str) -> str:
    return f"I can no longer post in this channel ({error})."


REPORT_CANVAS = "The report is in a canvas, linked here; report.md is attached too."


def table_below(number: int, caption: str) -> str:
    """Where an answer's table was: it is shown below the answer, as a table."""
    return f"_Table {number} below: {caption}_"
