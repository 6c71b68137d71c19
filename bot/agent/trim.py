"""Clearing old tool results from a saved conversation, when the endpoint cannot do it itself.

A cleared result keeps the call (its code is in the assistant turn that made it) and the first
line of its output; the rest gives way to a placeholder that says so. Thinking blocks are bound
to the conversation before them, so a rewritten history is sent without them (doc 1.4: "strip
or restart"); `rewritable` says when that is allowed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

THINKING_KINDS = ("thinking", "redacted_thinking")
# What lists a kernel's variables (the kernel runs cells in one plain namespace).
VARIABLES = "print({k: type(v).__name__ for k, v in globals().items() if k[:1] != '_'})"
CLEARED_MARK = "[Output cleared"
CLEARED = (
    CLEARED_MARK + " to keep this long conversation within the model's context. It began: "
    "{first} The call's code is above; variables it set may still be in the Python kernel "
    "(list them with `" + VARIABLES + "`), and its files are kept. Run it again if you need "
    "the whole output.]"
)
FIRST_LINE_CHARS = 200
NO_REPLY = {"type": "text", "text": "(no visible reply)"}
# The saved history must start with a user turn; the server reads on from its summary.
BEFORE_SUMMARY = {"type": "text", "text": "(Earlier turns were compacted into the summary below.)"}


def size(messages: list[dict[str, Any]]) -> int:
    """Characters of the messages as sent: what token estimates scale from."""
    return len(json.dumps(messages, ensure_ascii=False))


def rewritable(history: list[dict[str, Any]]) -> bool:
    """A history may be rewritten between questions, when its latest assistant turn holds no
    tool call: a tool loop being continued needs that turn's thinking as it was sent."""
    for message in reversed(history):
        if message["role"] == "assistant":
            return not any(b.get("type") == "tool_use" for b in blocks(message))
    return True


def clear_results(
    history: list[dict[str, Any]], keep: int, chars: int
) -> tuple[list[dict[str, Any]], int]:
    """A copy of `history` with the oldest tool results cleared (never the last `keep`), until
    at least `chars` characters are freed; and how many were cleared. The copy is sent without
    thinking once anything was cleared."""
    cleared = copy.deepcopy(history)
    results = [r for r in _results(cleared) if not _is_cleared(r)]
    freed = count = 0
    for result in results[: max(0, len(results) - keep)]:
        if freed >= chars:
            break
        before = len(result["content"])
        result["content"] = CLEARED.replace("{first}", _first_line(result["content"]))
        freed += before - len(result["content"])
        count += 1
    return (strip_thinking(cleared), count) if count else (history, 0)


def prune_compacted(history: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """After the server compacted, what it no longer reads (everything before its latest
    compaction block) is dropped from the saved history; None when there is nothing to drop."""
    for i in range(len(history) - 1, -1, -1):
        content = blocks(history[i])
        at = [j for j, b in enumerate(content) if b.get("type") == "compaction"]
        if history[i]["role"] != "assistant" or not at:
            continue
        if i == 1 and at[-1] == 0 and history[0]["content"] == [dict(BEFORE_SUMMARY)]:
            return None  # pruned already
        kept = [{"role": "assistant", "content": content[at[-1] :]}, *history[i + 1 :]]
        return strip_thinking(
            [{"role": "user", "content": [dict(BEFORE_SUMMARY)]}, *copy.deepcopy(kept)]
        )
    return None


def has_compaction(history: list[dict[str, Any]]) -> bool:
    return any(b.get("type") == "compaction" for m in history for b in blocks(m))


def changed(new: list[dict[str, Any]], old: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user messages of `old` that `new` (of the same length) replaced: what clearing
    took away."""
    return [o for n, o in zip(new, old, strict=True) if o["role"] == "user" and n != o]


def strip_thinking(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every assistant turn without its thinking blocks."""
    for message in history:
        if message["role"] == "assistant":
            drop_thinking(message)
    return history


def drop_thinking(message: dict[str, Any]) -> None:
    """One assistant turn without its thinking blocks (a turn of nothing else says so)."""
    if isinstance(message["content"], list):
        kept = [b for b in message["content"] if b.get("type") not in THINKING_KINDS]
        message["content"] = kept or [dict(NO_REPLY)]


def _results(history: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for message in history:
        if message["role"] == "user" and isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                    yield block


def _is_cleared(result: dict[str, Any]) -> bool:
    return str(result.get("content", "")).startswith(CLEARED_MARK)


def _first_line(output: str) -> str:
    """The result's status, if it has one, and the first line of what it printed."""
    lines = [s.strip() for s in output.splitlines()]
    status = next((s for s in lines if s.startswith("status: ")), "")
    marked = [i for i, s in enumerate(lines) if s.startswith("--- std")]
    printed = lines[marked[0] + 1 :] if marked else lines
    line = next((s for s in printed if s and not s.startswith("--- ")), "(nothing)")
    if len(line) > FIRST_LINE_CHARS:
        line = line[:FIRST_LINE_CHARS] + "…"
    return f"({status}) “{line}”." if status else f"“{line}”."


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content as blocks (a saved plain string is one text block)."""
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
