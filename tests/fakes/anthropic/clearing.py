"""``clear_tool_uses_20250919`` (doc 6): the oldest tool results replaced by a placeholder
once the prompt passes a trigger, before the prompt reaches the model.

Prompt size is the fake's usual estimate (``total_input_tokens``). The last ``keep`` tool uses
stay whole, counted over every tool; the results of ``exclude_tools`` are never cleared.
``clear_tool_inputs`` also empties the call's ``input``. With ``clear_at_least``, an edit that
would free fewer tokens than that clears nothing (doc 6: worth the cache rewrite or not done).
The messages are rebuilt, never changed in place: the client's history is the client's.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.anthropic.blocks import Block, as_blocks
from tests.fakes.anthropic.cache import total_input_tokens
from tests.fakes.anthropic.context import CLEAR, Edit

PLACEHOLDER = "[tool result cleared to save context]"
DEFAULT_TRIGGER = {"type": "input_tokens", "value": 100_000}  # doc 6 defaults
DEFAULT_KEEP = 3

Messages = list[dict[str, Any]]


def clear_tool_uses(body: dict[str, Any], edit: Edit) -> tuple[Messages, Edit | None]:
    """``body["messages"]`` after the edit, and the ``applied_edits`` entry (None when the
    edit did not apply: trigger not reached, nothing to clear, or too little)."""
    messages: Messages = body["messages"]
    uses = _tool_uses(messages)
    if not _fires(edit.get("trigger") or DEFAULT_TRIGGER, body, len(uses)):
        return messages, None
    chosen = _chosen(uses, edit)
    if not chosen:
        return messages, None
    edited = _rebuilt(messages, chosen, _input_names(edit, chosen))
    freed = total_input_tokens(body) - total_input_tokens({**body, "messages": edited})
    least = edit.get("clear_at_least") or {}
    if freed < least.get("value", 0):
        return messages, None
    return edited, {"type": CLEAR, "cleared_tool_uses": len(chosen), "cleared_input_tokens": freed}


def _tool_uses(messages: Messages) -> list[Block]:
    """Every tool call that has its result in the prompt, oldest first."""
    answered = {
        b.get("tool_use_id")
        for m in messages
        if m.get("role") == "user"
        for b in as_blocks(m.get("content"))
        if b.get("type") == "tool_result"
    }
    return [
        b
        for m in messages
        if m.get("role") == "assistant"
        for b in as_blocks(m.get("content"))
        if b.get("type") == "tool_use" and b.get("id") in answered
    ]


def _fires(trigger: dict[str, Any], body: dict[str, Any], uses: int) -> bool:
    measure = uses if trigger["type"] == "tool_uses" else total_input_tokens(body)
    return measure > trigger["value"]


def _chosen(uses: list[Block], edit: Edit) -> dict[str, str]:
    """Tool use id → tool name, for the calls to clear."""
    keep = (edit.get("keep") or {}).get("value", DEFAULT_KEEP)
    older = uses[: len(uses) - keep] if keep else uses
    excluded = set(edit.get("exclude_tools") or [])
    return {b["id"]: b.get("name", "") for b in older if b.get("name") not in excluded}


def _input_names(edit: Edit, chosen: dict[str, str]) -> set[str]:
    """The ids of the calls whose ``input`` is cleared too."""
    which = edit.get("clear_tool_inputs") or False
    if which is True:
        return set(chosen)
    names = set(which) if isinstance(which, list) else set()
    return {i for i, name in chosen.items() if name in names}


def _rebuilt(messages: Messages, results: dict[str, str], inputs: set[str]) -> Messages:
    out: Messages = []
    for message in messages:
        blocks = as_blocks(message.get("content"))
        edited = [_cleared(b, results, inputs) for b in blocks]
        changed = any(e is not b for e, b in zip(edited, blocks, strict=True))
        out.append({**message, "content": edited} if changed else message)
    return out


def _cleared(block: Block, results: dict[str, str], inputs: set[str]) -> Block:
    if block.get("type") == "tool_result" and block.get("tool_use_id") in results:
        return {**block, "content": PLACEHOLDER}
    if block.get("type") == "tool_use" and block.get("id") in inputs:
        return {**block, "input": {}}
    return block
