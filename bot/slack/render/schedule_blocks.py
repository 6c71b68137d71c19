"""A schedule's messages: the proposal with Confirm and Cancel, what it became, and the notes
a firing posts. Pure, like the rest of render/."""

from __future__ import annotations

from typing import Any

from bot.slack.render.block_kit import escape, fit, section

CONFIRM_ACTION = "schedule_confirm"
CANCEL_ACTION = "schedule_cancel"
QUESTION_MAX = 600  # characters of the question quoted in a message


def proposal(schedule_id: str, words: str, question: str, owner: str, note: str = "") -> list[Any]:
    """The proposal: the schedule in words, the question it reruns, and the buttons."""
    text = f"*Schedule this?* {escape(words)}\nEach firing reruns: {_quoted(question)}"
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
