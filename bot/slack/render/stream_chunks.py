"""The assistant style's payloads: chunks of one streamed message (a plan, a task per file that
came with the question and per tool call). Pure, like `render.py`, whose blocks it uses."""

from __future__ import annotations

from typing import Any

from bot.clip import clip
from bot.run_events import ToolCallFinished, ToolCallStarted
from bot.slack.render.block_kit import CODE_MAX, EXCERPT_MAX, stop_button


def step_title(step: int, event: ToolCallStarted | ToolCallFinished) -> str:
    """A task's title: the step, its language and the code's first line."""
    what = event.language or event.tool
    first = next((line.strip() for line in event.code.splitlines() if line.strip()), "")
    title = f"Step {step} · {what}" + (f": {first}" if first else "")
    return title if len(title) <= 120 else title[:119] + "…"


def task_started(step: int, event: ToolCallStarted) -> dict[str, Any]:
    details = clip(event.code.strip("\n").rstrip(), CODE_MAX)
    chunk = {"type": "task_update", "id": event.call_id, "title": step_title(step, event)}
    return {**chunk, "status": "in_progress", **({"details": details} if details else {})}


def task_finished(step: int, event: ToolCallFinished) -> dict[str, Any]:
    """A task's end. Slack wants every task_update whole (id, title, status), so the
    title it started with goes again."""
    ok = event.status in ("ok", "running")
    status = "complete" if ok else "error"
    title = step_title(step, event)
    chunk = {"type": "task_update", "id": event.call_id, "title": title, "status": status}
    output = clip(event.excerpt.rstrip(), EXCERPT_MAX)
    facts = f"{event.status} · {event.duration_s:.1f}s"
    return {**chunk, "output": f"{facts}\n{output}" if output else facts}


PLAN_TITLE = "Working on it"


def plan_opening(run_id: str, file_tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A streamed message's first chunks: the plan, a task per file, the Stop button."""
    stop = {"type": "blocks", "blocks": [stop_button(run_id)]}
    return [{"type": "plan_update", "title": PLAN_TITLE}, *file_tasks, stop]


def file_task(title: str, output: str, *, ok: bool, task_id: str) -> dict[str, Any]:
    """A file taken in (or refused) as a task of the run's plan."""
    status = "complete" if ok else "error"
    chunk = {"type": "task_update", "id": task_id, "title": title[:120], "status": status}
    return {**chunk, "output": output[:EXCERPT_MAX]}


def markdown_chunk(text: str) -> dict[str, Any]:
    return {"type": "markdown_text", "text": text}


def merged(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several updates of one task as one (later fields win), where it first appeared."""
    out: list[dict[str, Any]] = []
    tasks: dict[str, dict[str, Any]] = {}
    for chunk in chunks:
        if chunk.get("type") == "task_update" and chunk["id"] in tasks:
            tasks[chunk["id"]].update(chunk)
            continue
        chunk = dict(chunk)
        if chunk.get("type") == "task_update":
            tasks[chunk["id"]] = chunk
        out.append(chunk)
    return out
