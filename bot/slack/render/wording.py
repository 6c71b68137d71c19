"""What the bot says in a thread, in words: the listeners' short answers, and a run's notes
on restarts, idle sandboxes, waits, budgets, stops and failures. Pure text (the payloads
are `render.py`'s)."""

from __future__ import annotations

RESTARTING = "I'm restarting; try again in a minute."
RUN_ENDED = "That run has already ended."
CONTINUE_USED = "That Continue was used already."
NOT_THIS_THREAD = "That button isn't for a run of this thread, so I did nothing."
WHAT_NEXT = "What would you like me to find out?"
READING_QUESTION = "Reading the question…"


def reading(name: str) -> str:
    return f"Reading {name}…"


SHUTDOWN = (
    "The bot is restarting, so this run was interrupted. Reply here (for example "
    '"continue") in a minute to pick it up; the conversation and files are kept.'
)
RETRIED = (
    ":warning: The bot restarted while working on this thread, so that work was "
    "interrupted; answering the question again now (the conversation and files are kept)."
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
ROOM_DELETED = (
    ":zzz: Other threads needed a sandbox and the bot runs only so many at once, so this "
    "quiet thread's was shut down. Write here again to pick up where we left off: the "
    "files will be loaded again."
)
ROOM_STOPPED = (
    ":zzz: Other threads needed a sandbox and the bot runs only so many at once, so this "
    "quiet thread's was stopped; its files are kept for {kept}. Write here again to pick "
    "up where we left off."
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


SNAPSHOTTED = (
    ":zzz: This thread was quiet, so its sandbox was shut down and its files kept in a "
    "snapshot. Write here again to pick up where we left off: the files come back as they "
    "were."
)


def suspended(kept_s: float, for_room: bool = False, *, snapshot: bool = False) -> str:
    if snapshot:
        return SNAPSHOTTED
    if for_room:
        return ROOM_STOPPED.format(kept=span(kept_s)) if kept_s else ROOM_DELETED
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


# --- Tables and charts (render_data.py) ---------------------------------------------------

TABLE_CAPTION = "Table"


def table_capped(shown: int, total: int, csv_name: str | None, columns: tuple[int, int]) -> str:
    """Under a table Slack could not hold whole: what is shown, and where the rest is."""
    shown_cols, total_cols = columns
    parts = []
    if shown < total:
        parts.append(f"the first {shown:,} of {total:,} rows")
    if shown_cols < total_cols:
        parts.append(f"the first {shown_cols} of {total_cols} columns")
    text = "Showing " + " and ".join(parts)
    return text + (f"; the whole table is attached as {csv_name}." if csv_name else ".")


def table_pointer(number: int, caption: str) -> str:
    """Where a table taken out of the answer's text went."""
    return f"_Table {number} below: {caption}_"


REPORT_CANVAS = "The report is in a canvas, linked here; report.md is attached too."


# The answer's footer (block_kit.footer)
def took(duration_s: float, sandbox_wait_s: float) -> str:
    """The footer's time: "14s", or "12s, 8s of it starting the sandbox" when the wait for
    the sandbox is worth saying (a second or more)."""
    if sandbox_wait_s < 1:
        return f"{duration_s:.0f}s"
    return f"{duration_s:.0f}s, {min(sandbox_wait_s, duration_s):.0f}s of it starting the sandbox"


def notes_used(count: int) -> str:
    """The footer's word on the channel notes the answer says shaped it."""
    return f"used {count} channel note{'s' if count != 1 else ''}"


# The Show work and Notebook buttons under an answer (show_work.py, handlers.py)
SHOW_WORK = "Show work"
NOTEBOOK = "Notebook"
SHOW_WORK_TITLE = "Show work"  # a modal's title: 24 characters at most
SHOW_WORK_CLOSE = "Close"
SHOW_WORK_INTRO = (
    "Where each figure in the answer came from: the step that printed it, its code, and the line."
)
NO_FIGURES = (
    "No figures were recorded for this answer (it was given before the bot traced its "
    "figures, or it has none)."
)
RUN_GONE = "This answer's run is no longer in the store."
FIGURE_NOT_FOUND = "not found in any step's output"
OUTPUT_LINE = "The line it printed:"
NOTEBOOK_FAILED = "Sorry, I couldn't make this thread's notebook just now; try again in a minute."


def step_label(step: int) -> str:
    return f"Step {step}"


def more_figures(n: int) -> str:
    return f"… and {n} more figure{'s' if n != 1 else ''}"
