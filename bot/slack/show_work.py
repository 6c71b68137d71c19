"""The Show work modal: where each figure in an answer came from, built from the store only
(the run's recorded figures and its tool calls), so it opens after a restart and on any
replica. Pure: no I/O.

For each figure: a divider, a section naming it and its step ("Step 2 · `python`"), that
step's code (clipped, in a code block) and the output line that printed it; a figure found
in no output says so, in two blocks. Slack's limits for a modal are kept: at most 100
blocks (one goes to the introduction, one is kept for the end), each section's text at
most 3,000 characters, the title at most 24. Figures are shown in the answer's order while
their blocks fit; when some do not, the last block says "… and N more figures".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.slack import notes
from bot.slack.render import code_block, escape, fit, section
from bot.store.base import RunRecord, ToolCallRecord

CALLBACK_ID = "show_work"
MAX_BLOCKS = 100  # a modal's
CODE_MAX = 1500  # characters of a step's code, fences included
LINE_MAX = 600  # of the output line
FIGURE_MAX = 200  # of a figure's own text


def modal(run: RunRecord | None, calls: Sequence[ToolCallRecord]) -> dict[str, Any]:
    """The modal (a views.open view) for `run`, its tool calls in order in `calls`."""
    if run is None:
        return _view([section(notes.RUN_GONE)], "")
    if not run.figures:
        return _view([section(notes.NO_FIGURES)], run.run_id)
    by_id = {c.call_id: c for c in calls}
    blocks = [section(notes.SHOW_WORK_INTRO)]
    room = MAX_BLOCKS - len(blocks) - 1  # one kept for "… and N more"
    shown = 0
    for figure in run.figures:
        drawn = figure_blocks(figure, _call_of(figure, calls, by_id))
        if len(drawn) > room:
            break
        blocks += drawn
        room -= len(drawn)
        shown += 1
    if left := len(run.figures) - shown:
        blocks.append(section(f"_{notes.more_figures(left)}_"))
    return _view(blocks, run.run_id)


def figure_blocks(figure: dict[str, Any], call: ToolCallRecord | None) -> list[dict[str, Any]]:
    """One figure's blocks: it and its step, the step's code, the line it was printed in."""
    said = f"*{escape(fit(str(figure.get('text') or '?'), FIGURE_MAX))}*"
    step = figure.get("step")
    if step is None:
        return [{"type": "divider"}, section(f"{said} · {notes.FIGURE_NOT_FOUND}")]
    what = f" · `{call.language or call.tool}`" if call is not None else ""
    blocks = [{"type": "divider"}, section(f"{said} · {notes.step_label(int(step))}{what}")]
    if call is not None and call.code.strip():
        blocks.append(section(code_block(call.code, CODE_MAX)))
    line = str(figure.get("line") or "")
    if line.strip():
        blocks.append(section(f"{notes.OUTPUT_LINE}\n{code_block(line, LINE_MAX)}"))
    return blocks


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
        "title": {"type": "plain_text", "text": notes.SHOW_WORK_TITLE},
        "close": {"type": "plain_text", "text": notes.SHOW_WORK_CLOSE},
        "private_metadata": run_id,
        "blocks": blocks,
    }
