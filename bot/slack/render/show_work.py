"""The Show work modal: where each figure in an answer came from, built from the store only
(the run's recorded figures and its tool calls), so it opens after a restart and on any
replica. Pure: no I/O.

Figures are grouped by the step that printed them, in the order the answer names them:
for each step a divider, its name ("Step 2 · `python`"), its code once (clipped, in a
code block), then one section per figure with the output line that printed it. Figures
found in no output are listed together at the end. Slack's limits for a modal are kept:
at most 100 blocks (one goes to the introduction, one is kept for the end), each
section's text at most 3,000 characters, the title at most 24. Figures are shown while
their blocks fit; when some do not, the last block says "… and N more figures".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.slack.render import wording
from bot.slack.render.block_kit import code_block, escape, fit, section
from bot.store.base import RunRecord, ToolCallRecord

CALLBACK_ID = "show_work"
MAX_BLOCKS = 100  # a modal's
CODE_MAX = 1500  # characters of a step's code, fences included
LINE_MAX = 600  # of the output line
FIGURE_MAX = 200  # of a figure's own text


def modal(run: RunRecord | None, calls: Sequence[ToolCallRecord]) -> dict[str, Any]:
    """The modal (a views.open view) for `run`, its tool calls in order in `calls`."""
    if run is None:
        return _view([section(wording.RUN_GONE)], "")
    if not run.figures:
        return _view([section(wording.NO_FIGURES)], run.run_id)
    by_id = {c.call_id: c for c in calls}
    blocks = [section(wording.SHOW_WORK_INTRO)]
    reused = [c.code for c in calls if c.tool == "load_definition" and c.status == "ok"]
    if reused:
        names = ", ".join(f"*{escape(fit(name, 80))}*" for name in dict.fromkeys(reused))
        blocks.append(section(f"Reused the channel's saved definition of {names}."))
    room = MAX_BLOCKS - len(blocks) - 1  # one kept for "… and N more"
    shown, lost, steps = 0, [], set()
    for figure in run.figures:
        if figure.get("step") is None:
            lost.append(figure)
            continue
        call = _call_of(figure, calls, by_id)
        key = call.call_id if call is not None else f"step {figure.get('step')}"
        drawn = [] if key in steps else step_blocks(int(figure["step"]), call)
        drawn.append(figure_block(figure))
        if len(drawn) > room:
            break
        steps.add(key)
        blocks += drawn
        room -= len(drawn)
        shown += 1
    if lost and room >= 2 and shown == len(run.figures) - len(lost):
        names = ", ".join(_said(f) for f in lost)
        blocks += [
            {"type": "divider"},
            section(f"*{wording.FIGURE_NOT_FOUND.capitalize()}:* {names}"),
        ]
        shown += len(lost)
    if left := len(run.figures) - shown:
        blocks.append(section(f"_{wording.more_figures(left)}_"))
    return _view(blocks, run.run_id)


def step_blocks(step: int, call: ToolCallRecord | None) -> list[dict[str, Any]]:
    """A step's heading and its code, shown once above the figures it printed."""
    what = f" · `{call.language or call.tool}`" if call is not None else ""
    blocks = [{"type": "divider"}, section(f"*{wording.step_label(step)}*{what}")]
    if call is not None and call.code.strip():
        blocks.append(section(code_block(call.code, CODE_MAX)))
    if call is not None and call.tool == "run_sql" and call.excerpt:
        blocks.append(section(f"_{escape(call.excerpt)}_"))  # the rows, connection and file
    return blocks


def figure_block(figure: dict[str, Any]) -> dict[str, Any]:
    """A figure and the output line that printed it."""
    said = f"*{_said(figure)}*"
    line = str(figure.get("line") or "")
    if not line.strip():
        return section(said)
    return section(f"{said} · {wording.OUTPUT_LINE}\n{code_block(line, LINE_MAX)}")


def _said(figure: dict[str, Any]) -> str:
    """A figure as the answer wrote it, escaped and clipped for mrkdwn."""
    return escape(fit(str(figure.get("text") or "?"), FIGURE_MAX))


def _call_of(
    figure: dict[str, Any], calls: Sequence[ToolCallRecord], by_id: dict[str, ToolCallRecord]
) -> ToolCallRecord | None:
    """The step a figure names: by its call id, else by its number among the run's calls."""
    if (call := by_id.get(str(figure.get("call_id") or ""))) is not None:
        return call
    step = figure.get("step")
    if isinstance(step, int) and 1 <= step <= len(calls):
        return calls[step - 1]
    return None


def _view(blocks: list[dict[str, Any]], run_id: str) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": CALLBACK_ID,
        "title": {"type": "plain_text", "text": wording.SHOW_WORK_TITLE},
        "close": {"type": "plain_text", "text": wording.SHOW_WORK_CLOSE},
        "private_metadata": run_id,
        "blocks": blocks,
    }
