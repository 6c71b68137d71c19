"""Checking a final answer before it is posted: each of its figures traced to the output of
a step of this run (numbered 1..n in call order, as the thread and the terminal number
them) or, failing that, of an earlier question's run still in the history. A figure no
output printed goes back to the model once (`correction`)."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from bot.trace import Source, Trace, summary, trace

CORRECTION_HEAD = "These figures appear in no step's output:"
CORRECTION = CORRECTION_HEAD + " {figures} — correct them, or compute them with a step."


@dataclass(frozen=True)
class Checked:
    """An answer's figures with where each came from, and the note saying what holds."""

    traces: tuple[Trace, ...] = ()
    note: str = ""

    @property
    def missing(self) -> list[str]:
        """The untraced figures as written, each once, in the answer's order."""
        return list(dict.fromkeys(t.figure.text for t in self.traces if t.step is None))


async def check(
    answer: str,
    question: str,
    history: Sequence[dict[str, Any]],
    run_calls: Sequence[str],
    notes: Collection[str] = (),
) -> Checked:
    """Trace `answer` against the steps in `history`: `run_calls` are this run's calls in
    order; `notes` are texts the bot writes itself (a call's result when it never ran, and
    user messages that ask nothing). Off the event loop: a 200 k-character output takes
    tens of milliseconds to index."""
    if not answer.strip():
        return Checked()
    found = sources(history, run_calls, notes)
    traces = await asyncio.to_thread(trace, answer, found, question)
    return Checked(tuple(traces), summary(traces))


def correction(checked: Checked) -> str:
    """The user message that sends the untraced figures back to the model."""
    return CORRECTION.format(figures=", ".join(checked.missing))


def is_correction(text: str) -> bool:
    return text.startswith(CORRECTION_HEAD)


def sources(
    history: Sequence[dict[str, Any]],
    run_calls: Sequence[str],
    notes: Collection[str] = (),
) -> list[Source]:
    """This run's steps, then each earlier question's, numbered within their own run."""
    outputs = _outputs(history)
    codes = _codes(history)
    own = set(run_calls)
    found = [
        Source(step, outputs[call_id], codes.get(call_id, ""), 0, call_id)
        for step, call_id in enumerate(run_calls, 1)
        if call_id in outputs
    ]
    questions = _earlier_questions(history, own, outputs, notes)
    for earlier, calls in enumerate(reversed(questions), 1):
        for step, call_id in enumerate(calls, 1):
            found.append(Source(step, outputs[call_id], codes.get(call_id, ""), earlier, call_id))
    return found


def _earlier_questions(
    history: Sequence[dict[str, Any]],
    own: set[str],
    outputs: dict[str, str],
    notes: Collection[str],
) -> list[list[str]]:
    """The ids of the calls that ran, per question before this run's, oldest first. A
    question starts at a user message with text of its own (not a note the bot adds)."""
    questions: list[list[str]] = [[]]
    for message in history:
        blocks = _blocks(message)
        if message.get("role") == "user" and any(_asks(b, notes) for b in blocks):
            questions.append([])
        for block in blocks:
            call_id = block.get("id", "")
            if block.get("type") != "tool_use" or call_id in own or call_id not in outputs:
                continue
            if outputs[call_id] not in notes:
                questions[-1].append(call_id)
    return [calls for calls in questions if calls]


def _asks(block: dict[str, Any], notes: Collection[str]) -> bool:
    text = block.get("text", "") if block.get("type") == "text" else ""
    return bool(text.strip()) and not is_correction(text) and text not in notes


def _outputs(history: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each tool result's whole text, by the id of its call."""
    found = {}
    for message in history:
        for block in _blocks(message):
            if block.get("type") == "tool_result":
                found[block.get("tool_use_id", "")] = _text(block.get("content"))
    return found


def _codes(history: Sequence[dict[str, Any]]) -> dict[str, str]:
    found = {}
    for message in history:
        for block in _blocks(message):
            if block.get("type") == "tool_use":
                data = block.get("input")
                code = data.get("code", "") if isinstance(data, dict) else ""
                found[block.get("id", "")] = str(code)
    return found


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""
