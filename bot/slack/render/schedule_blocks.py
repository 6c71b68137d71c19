"""A schedule's messages: the proposal with Confirm and Cancel, what it became, and the notes
a firing posts. Pure, like the rest of render/."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.slack.render.block_kit import escape, fit, section

CONFIRM_ACTION = "schedule_confirm"
RETRY_ACTION = "schedule_retry"
CANCEL_ACTION = "schedule_cancel"
QUESTION_MAX = 600  # characters of the question quoted in a message


def proposal(
    schedule_id: str, words: str, question: str, owner: str, note: str = "", post_as: str = ""
) -> list[Any]:
    """The proposal: the schedule in words, the question it reruns, and the buttons."""
    text = f"*Schedule this?* {escape(words)}\nEach firing reruns: {_quoted(question)}"
    if post_as == "channel":
        text += "\nEach firing is posted as a new message in the channel, its run in its thread."
    text += f"\n_Only <@{owner}> can confirm it._" + (f" {escape(note)}" if note else "")

    def button(action_id: str, label: str, style: str | None) -> dict[str, Any]:
        made = {
            "type": "button",
            "action_id": action_id,
            "text": {"type": "plain_text", "text": label},
            "value": schedule_id,
        }
        return {**made, "style": style} if style else made

    return [
        section(text),
        {
            "type": "actions",
            "elements": [
                button(CONFIRM_ACTION, "Confirm", "primary"),
                button(CANCEL_ACTION, "Cancel", None),
            ],
        },
    ]


def proposal_text(words: str) -> str:
    return f"Schedule this? {words}"


def confirmed(words: str, question: str, by: str) -> str:
    return f"Scheduled by <@{by}>: {escape(words)}\nEach firing reruns: {_quoted(question)}"


def cancelled(by: str) -> str:
    return f"Schedule cancelled by <@{by}>; nothing was saved."


def refused(why: str) -> str:
    return f"I could not schedule that: {escape(why)}"


def firing(words: str, late_by_s: float, missed: int) -> str:
    """The note before a firing's run."""
    text = f"Scheduled run ({escape(words)})."
    if late_by_s > 0:
        text += f" It is {_late(late_by_s)} late: the bot was not running when it was due."
        if missed:
            text += f" {missed} earlier firing{'s' if missed > 1 else ''} did not run."
    return text


def failed(schedule_id: str, retry_at: float) -> tuple[str, list[dict[str, Any]]]:
    """After a failed firing (its run said what failed): Retry, which fires it again once."""
    text = "This scheduled run failed."
    button = {
        "type": "button",
        "action_id": RETRY_ACTION,
        "text": {"type": "plain_text", "text": "Retry"},
        "value": f"{schedule_id}|{retry_at!r}",
    }
    return text, [section(text), {"type": "actions", "elements": [button]}]


def retrying(by: str) -> str:
    return f"This scheduled run failed. Retried by <@{by}>."


def paused(failures: int, owner: str, editors: list[str]) -> str:
    who = ", ".join(f"<@{u}>" for u in [owner, *editors])
    return (
        f"This schedule is paused after {failures} failed firings in a row. {who} can resume "
        "it with `/analyze schedules`."
    )


def lost_access(owner: str) -> str:
    return f"This schedule is paused: <@{owner}> may no longer use the bot here."


def _quoted(question: str) -> str:
    return "> " + escape(fit(question, QUESTION_MAX)).replace("\n", "\n> ")


def _late(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.0f} h"
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


PAUSE_ACTION = "schedule_pause"
RESUME_ACTION = "schedule_resume"
DELETE_ACTION = "schedule_delete"
LIST_MAX = 15  # schedules shown in one list message (three blocks each, within 50)
# A list's buttons are named "<action>:<schedule id>": unique within the message.
MANAGE_ACTIONS = re.compile(rf"^({PAUSE_ACTION}|{RESUME_ACTION}|{DELETE_ACTION}):")


def listing(
    entries: Sequence[tuple[str, str, str]], spent_usd: float = 0.0
) -> tuple[str, list[dict[str, Any]]]:
    """The channel's schedules: (id, state, line) each, with the buttons its state offers,
    and what their firings cost this month."""
    if not entries:
        text = 'No schedules in this channel. Ask in a thread: "every Monday at 9 post this again".'
        return text, [section(text)]
    head = f"*Schedules in this channel* ({len(entries)}) · spent this month: ${spent_usd:.2f}"
    blocks: list[dict[str, Any]] = [section(head)]
    for schedule_id, state, line in entries[:LIST_MAX]:
        toggle = (RESUME_ACTION, "Resume") if state == "paused" else (PAUSE_ACTION, "Pause")
        buttons = [toggle, (DELETE_ACTION, "Delete")]
        blocks += [
            {"type": "divider"},
            section(line),
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "action_id": f"{action}:{schedule_id}",
                     "value": schedule_id, "text": {"type": "plain_text", "text": label}}
                    for action, label in buttons
                ],
            },
        ]  # fmt: skip
    if len(entries) > LIST_MAX:
        blocks.append(section(f"_… and {len(entries) - LIST_MAX} more._"))
    return head, blocks


def list_line(words: str, state: str, why: str, owner: str, last: str, thread_link: str) -> str:
    """One schedule in the list: its words (with the next firing), state, owner, last result."""
    status = "paused" + (f" ({escape(why)})" if why else "") if state == "paused" else state
    return f"{escape(words)}\n*{status}* · owner <@{owner}> · last: {escape(last)} · {thread_link}"
