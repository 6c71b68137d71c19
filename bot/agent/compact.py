"""Compaction of our own: the conversation so far becomes a summary the model writes, for
endpoints without server-side compaction (and windows below its 50,000-token minimum).

The summary replaces every turn, so no thinking block is left bound to a conversation that
changed; the latest question and answer follow it word for word.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
from anthropic.types import Message
from anthropic.types.beta import BetaMessage

from bot.agent.model_client import RetryPolicy, create_message
from bot.agent.trim import VARIABLES, blocks
from bot.sandbox.base import WORK_DIR

INSTRUCTIONS = (
    "Summarise the conversation above so that it can go on from your summary alone. Include: "
    "every question asked and what was found, with the exact figures, units, filters and "
    "exclusions; the files read and written, with their paths; the variables and data frames "
    "set in the Python kernel and what they hold; what is still open. Be complete on figures "
    "and terse on everything else. Write the summary only."
)
SYSTEM = "You write the summary that replaces the older part of a data-analysis conversation."
HEADER = (
    "Summary of the conversation so far. Older turns were compacted to fit the model's "
    f"context: their code and output are no longer shown. Files in {WORK_DIR} are kept, and "
    "variables set in earlier steps may still be in the Python kernel: list them with "
    f"`{VARIABLES}`.\n\n"
)
LATEST = "\n\nThe latest question and answer, word for word:\n"
LATEST_CHARS = 4000
SUMMARY_TOKENS = 8192
# Clip levels for each step's output and code, tried in turn until the transcript fits.
CLIPS = ((4000, 4000), (1500, 2000), (400, 800), (100, 300), (0, 200))


async def summarise(
    client: anthropic.AsyncAnthropic,
    model: str,
    history: list[dict[str, Any]],
    *,
    budget_chars: int,
    max_tokens: int,
    retry: RetryPolicy,
) -> tuple[str, Message | BetaMessage]:
    """The model's summary of `history` (a transcript of at most `budget_chars`)."""
    text = transcript(history, budget_chars)
    params = {
        "model": model,
        "max_tokens": min(SUMMARY_TOKENS, max_tokens),
        "system": SYSTEM,
        "messages": [{"role": "user", "content": f"{text}\n\n{INSTRUCTIONS}"}],
    }
    message = await create_message(client, params, retry)
    summary = "\n\n".join(b.text for b in message.content if b.type == "text").strip()
    return summary, message


def compacted(summary: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history that replaces `history`: one user message, the summary then the latest
    exchange. The next question joins that message."""
    latest = _latest_exchange(history)
    text = HEADER + summary + (LATEST + latest if latest else "")
    return [{"role": "user", "content": [{"type": "text", "text": text}]}]


def transcript(history: list[dict[str, Any]], budget_chars: int) -> str:
    """The conversation as plain text, outputs and code clipped (then the oldest entries
    dropped) to fit `budget_chars`."""
    for output_chars, code_chars in CLIPS:
        entries = list(_entries(history, output_chars, code_chars))
        if sum(len(e) + 2 for e in entries) <= budget_chars:
            return "\n\n".join(entries)
    while entries and sum(len(e) + 2 for e in entries) > budget_chars:
        entries.pop(1 if len(entries) > 1 else 0)  # the first may be an earlier summary
    return "\n\n".join(entries)[:budget_chars]


def _entries(history: list[dict[str, Any]], output_chars: int, code_chars: int) -> Iterator[str]:
    steps: dict[str, int] = {}
    for message in history:
        for block in blocks(message):
            kind = block.get("type")
            if kind == "text" and block.get("text", "").strip():
                who = "User" if message["role"] == "user" else "Assistant"
                yield f"{who}: {block['text'].strip()}"
            elif kind == "tool_use":
                steps[block.get("id", "")] = n = len(steps) + 1
                yield f"Step {n} ({block.get('name')}): {_clip(_code(block), code_chars)}"
            elif kind == "tool_result" and output_chars:
                n = steps.get(block.get("tool_use_id", ""), 0)
                yield f"Output of step {n}: {_clip(_result_text(block), output_chars)}"
            elif kind == "compaction" and block.get("content"):
                yield f"Summary of earlier turns: {block['content']}"


def _latest_exchange(history: list[dict[str, Any]]) -> str:
    """The latest question (a user text) and the answer after it, clipped."""
    question = answer = ""
    for message in history:
        texts = [b["text"] for b in blocks(message) if b.get("type") == "text"]
        if message["role"] == "user" and texts:
            question, answer = texts[-1], ""
        elif message["role"] == "assistant" and texts:
            answer = "\n".join(texts)
    if not question or question.startswith(HEADER[:40]):
        return ""
    return _clip(f"Question: {question}\nAnswer: {answer or '(none yet)'}", LATEST_CHARS)


def _code(block: dict[str, Any]) -> str:
    given = block.get("input")
    args: dict[str, Any] = given if isinstance(given, dict) else {}
    if "code" in args:
        return f"{args.get('language', '')}\n{args['code']}"
    return ", ".join(f"{k}={v}" for k, v in args.items())


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars] + f"… ({len(text) - chars:,} more chars)"
