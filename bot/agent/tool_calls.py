"""Running the tool calls of one model turn, and answering every call's id.

Calls run one by one (they share a working folder). Every tool_use gets its tool_result,
even when the run is cancelled or the call was never run: the API refuses a history with
an unanswered call.
"""

from __future__ import annotations

from typing import Any

from bot.agent.blocks import started, tool_result
from bot.agent.tools import Toolbox, ToolOutcome
from bot.run_events import AgentView, ToolCallFinished

CANCELLED_NOTE = "The user cancelled the run before this tool call finished."
INTERRUPTED_NOTE = "The bot restarted before this tool call finished; it did not complete."
TRUNCATED_CALL_NOTE = (
    "Your reply hit the output token limit before this tool call was complete, so it was not "
    "run. Send shorter code, or split the work into several calls."
)


async def run_calls(
    calls: list[Any],
    toolbox: Toolbox,
    view: AgentView,
    steps: list[str],
    results: list[dict[str, Any]],
    *,
    truncated: bool,
) -> None:
    """Run `calls` in order, appending each one's result block to `results` as it comes (so
    a cancelled run keeps the results it has) and its id to `steps`. Calls of a turn cut at
    the output limit are answered unrun: their input may be incomplete."""
    for call in calls:
        if truncated:
            outcome = ToolOutcome(TRUNCATED_CALL_NOTE, True, "invalid")
        else:
            outcome = await run_call(call, toolbox, view, steps)
        results.append(tool_result(call.id, outcome))


async def run_call(call: Any, toolbox: Toolbox, view: AgentView, steps: list[str]) -> ToolOutcome:
    """One call, told to the view as it starts and when it finishes."""
    args = call.input if isinstance(call.input, dict) else {}
    start = started(call.id, call.name, args)
    await view(start)
    steps.append(call.id)
    outcome = await toolbox.call(call.name, call.input)
    await view(
        ToolCallFinished(
            call.id,
            call.name,
            outcome.status,
            outcome.exit_code,
            outcome.duration_s,
            outcome.excerpt,
            start.language,
            start.code,
        )
    )
    return outcome


def cancelled(calls: list[Any], results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Results for the calls `results` does not answer yet: the run was cancelled first."""
    answered = {r["tool_use_id"] for r in results}
    note = ToolOutcome(CANCELLED_NOTE, True, "killed")
    return [tool_result(c.id, note) for c in calls if c.id not in answered]


def unrun(calls: list[Any], note: str) -> list[dict[str, Any]]:
    """Results for calls that will not run, saying why."""
    return [tool_result(c.id, ToolOutcome(note, True, "invalid")) for c in calls]


def interrupted(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Results for the calls a saved assistant turn left unanswered: a crash cut the run."""
    if not message or message["role"] != "assistant":
        return []
    note = ToolOutcome(INTERRUPTED_NOTE, True, "killed")
    return [tool_result(b["id"], note) for b in message["content"] if b.get("type") == "tool_use"]
