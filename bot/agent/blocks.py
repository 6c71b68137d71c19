"""Content blocks between the SDK, the saved history and the events."""

from __future__ import annotations

import json
from typing import Any

from anthropic.types import Message

from bot.agent.tools import ToolOutcome
from bot.run_events import ToolCallStarted

MODEL_KEY = "model"  # on a saved assistant message: the model that wrote it


def for_api(message: dict[str, Any]) -> dict[str, Any]:
    """A saved message as the API takes it: the model mark is ours alone."""
    return {"role": message["role"], "content": message["content"]}


def compaction_iterations(message: Any) -> list[Any]:
    """The server's compaction iterations: billed, and not in the top-level usage (doc 1.6)."""
    iterations = getattr(message.usage, "iterations", None) or []
    return [i for i in iterations if getattr(i, "type", None) == "compaction"]


def dump(blocks: list[Any]) -> list[dict[str, Any]]:
    """Assistant blocks as plain JSON, unmodified (thinking signatures must survive)."""
    return [b.model_dump(mode="json", exclude_none=True) for b in blocks]


def texts(message: Message) -> list[str]:
    return [b.text for b in message.content if b.type == "text" and b.text.strip()]


def tool_result(call_id: str, outcome: ToolOutcome) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    result["content"] = outcome.content
    if outcome.is_error:
        result["is_error"] = True
    return result


def sql_step(args: dict[str, Any]) -> str:
    """A query as its step shows it: a comment naming the connection and the file, then
    the SQL (what the audit keeps, Show work shows and the notebook reruns)."""
    head = f"-- {args.get('connection', '?')} → queries/{args.get('save_as', '?')}.csv"
    return f"{head}\n{args.get('sql', '')}"


def started(call_id: str, name: str, args: dict[str, Any]) -> ToolCallStarted:
    if name == "run_code":
        return ToolCallStarted(
            call_id,
            name,
            str(args.get("language", "?")),
            str(args.get("code", "")),
            bool(args.get("detached", False)),
        )
    if name == "run_sql":
        return ToolCallStarted(call_id, name, "sql", sql_step(args))
    if name == "load_definition":  # the name alone: what Show work says was reused
        return ToolCallStarted(call_id, name, None, str(args.get("name", "")))
    if name in ("schedule_run", "propose_note"):  # its input whole, for the front end
        return ToolCallStarted(call_id, name, None, json.dumps(args, ensure_ascii=False))
    summary = ", ".join(f"{k}={v}" for k, v in args.items())
    return ToolCallStarted(call_id, name, None, summary)
