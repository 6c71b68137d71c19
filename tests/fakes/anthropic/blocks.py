"""Content blocks for the fake Messages API: builders for scripts, and how blocks are read."""

from __future__ import annotations

import json
import math
import secrets
import string
from typing import Any

Block = dict[str, Any]
THINKING_KINDS = ("thinking", "redacted_thinking")


def random_id(prefix: str) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "01" + "".join(secrets.choice(alphabet) for _ in range(22))


def text(s: str) -> Block:
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> Block:
    return {"type": "tool_use", "id": id or random_id("toolu_"), "name": name, "input": input}


def thinking(s: str) -> Block:
    """A thinking block; the server signs it when it sends it."""
    return {"type": "thinking", "thinking": s, "signature": ""}


def redacted_thinking() -> Block:
    """A redacted thinking block; the server fills in its opaque ``data`` when it sends it."""
    return {"type": "redacted_thinking", "data": ""}


def as_blocks(content: Any) -> list[Block]:
    """Message or system content as a list of blocks (a bare string is one text block)."""
    if isinstance(content, str):
        return [text(content)]
    return list(content) if isinstance(content, list) else []


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def as_sent(obj: Any) -> str:
    """JSON as the client wrote it: key order and every field kept (spacing aside)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def without_marker(block: Block) -> Block:
    """A block minus its ``cache_control``: moving a breakpoint changes nothing else."""
    return {k: v for k, v in block.items() if k != "cache_control"}


def tokens(s: str) -> int:
    return math.ceil(len(s) / 4)


def merge_roles(messages: list[Any]) -> list[Any]:
    """Consecutive messages of one role merged into one, as the API does (doc 1.2 "Roles")."""
    merged: list[Any] = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        earlier_role = merged[-1].get("role") if merged and isinstance(merged[-1], dict) else None
        if role is not None and role == earlier_role:
            earlier = merged[-1]
            content = [*as_blocks(earlier.get("content")), *as_blocks(message.get("content"))]
            merged[-1] = {**earlier, "content": content}
        else:
            merged.append(message)
    return merged


def block_payload(block: Block) -> str:
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind == "thinking":
        return block.get("thinking", "")
    if kind in ("tool_use", "server_tool_use"):
        return block.get("name", "") + canonical(block.get("input", {}))
    return canonical(block)
