"""The model's `schedule_run`: it proposes a schedule, and nothing more. The person who asked
sees it in plain words, in their own time zone, with Confirm and Cancel (the front end's
part); nothing is saved until they confirm. Here the expression is checked, so the model
hears at once what cannot be a schedule."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field

from bot.schedules.cadence import CadenceError, cadence

DESCRIPTION = (
    "Propose rerunning an analysis of this thread on a schedule, when someone asks for it "
    '("every Monday at 9 post this again", "run this daily at 8"). Give a five-field cron '
    "expression (minute hour day month weekday) in the asker's own local time: the bot reads "
    "it in their Slack time zone. The person sees the schedule in words with Confirm and "
    "Cancel; nothing is scheduled until they confirm. Each firing reruns `question` as a new "
    "run in this thread, on fresh data."
)


class ScheduleRun(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cron: str = Field(description="Five cron fields in the asker's local time, e.g. '0 9 * * 1'.")
    question: str = Field(
        default="",
        description="The analysis to rerun, as a question that stands on its own. Empty: the "
        "thread's question before this one.",
    )
    new_message: bool = Field(
        default=False,
        description="Post each firing as a new message in the channel, with its run in that "
        "message's thread (when they ask for that), instead of in this thread. A new thread "
        "has none of this thread's files: use it for analyses of connections or repositories.",
    )


def proposed(parsed: ScheduleRun, min_interval_s: float) -> tuple[str, bool]:
    """What the model is told of its proposal, and whether it was an error."""
    try:
        cadence(parsed.cron, "UTC", now=datetime.fromtimestamp(time.time(), UTC),
                min_interval_s=min_interval_s)  # fmt: skip
    except CadenceError as exc:
        return f"Not proposed: {exc}", True
    return (
        f"Proposed '{parsed.cron}'. The person who asked now sees it in words, in their time "
        "zone, with Confirm and Cancel; it is saved only when they confirm. Tell them so in "
        "one line; do not run the analysis again now unless they asked for that too.",
        False,
    )
