"""The renderer: the Slack payloads of a run, for both UI styles, inside Slack's size
limits. Pure: no I/O, no state. Classic: one message per step (edited when it ends), a
status line, the answer in messages. Agent: chunks for one streamed message (a plan with a
task per file and per step), the answer as markdown, its footer and feedback buttons.
Under an answer whose run ran steps, in either style, the Show work and Notebook buttons
(`work_buttons`); a run that only answered has no work to show, and gets neither.
The texts the views say are in `wording.py`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.clip import clip
from bot.run_events import RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack.render import markdown_split, wording

SECTION_MAX = 3000  # characters in a section block's text
CODE_MAX = 2400
EXCERPT_MAX = 600
CUT_NOTE_MAX = 48  # clip's "[… N characters cut …]" and its line breaks
STOP_ACTION = "stop_run"
CONTINUE_ACTION = "continue_run"
GRANT_SEP = "|"  # a Continue button's value: the thread's key, then its grant id


def continue_value(value: str) -> tuple[str, str]:
    """(key, grant id) of a Continue button; a button from before grant ids had only the
    key, and gets one grant per thread."""
    key, sep, grant_id = value.rpartition(GRANT_SEP)
    return (key, grant_id) if sep else (value, f"thread:{value}")


def escape(text: str) -> str:
    """mrkdwn needs &, < and > escaped (they start links and mentions)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(text: str, limit: int) -> str:
    """`clip`, but at most `limit` characters all told: Slack refuses a block over its
    limit, and clip's note on what it cut comes on top of what it keeps."""
    if len(text) <= limit:
        return text
    clipped = clip(text, max(0, limit - CUT_NOTE_MAX))
    return clipped if len(clipped) <= limit else clipped[:limit]


def code_block(text: str, limit: int) -> str:
    """`text` as a code block of at most `limit` characters, fences included, escaped (which
    can make it longer: the raw text is cut further until it fits)."""
    raw, keep = text.rstrip() or " ", limit - 6
    while True:
        body = escape(fit(raw, keep)).replace("```", "`\u200b``")
        if len(body) <= limit - 6 or keep <= 0:
            return f"```{body[: limit - 6]}```"
        keep -= len(body) - (limit - 6)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": fit(text, SECTION_MAX)}}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": fit(text, 1900)}]}


def tool_started(step: int, event: ToolCallStarted) -> tuple[str, list[dict[str, Any]]]:
    what = event.language or event.tool
    head = f":hourglass_flowing_sand: *Step {step}* · `{what}`" + (
        " (in the background)" if event.detached else ""
    )
    blocks = [section(head)]
    if event.code.strip():
        blocks.append(section(code_block(event.code, CODE_MAX)))
    return f"Step {step}: {what}", blocks


def tool_finished(step: int, event: ToolCallFinished) -> tuple[str, list[dict[str, Any]]]:
    """A step's message once it ended (the event says what ran, too)."""
    ok = event.status in ("ok", "running")
    mark = ":white_check_mark:" if ok else ":x:"
    what = event.language or event.tool
    facts = [event.status]
    if event.exit_code is not None:
        facts.append(f"exit {event.exit_code}")
    facts.append(f"{event.duration_s:.1f}s")
    blocks = [section(f"{mark} *Step {step}* · `{what}` · {' · '.join(facts)}")]
    if event.code.strip():
        blocks.append(section(code_block(event.code, CODE_MAX)))
    if event.excerpt.strip():
        blocks.append(section(code_block(event.excerpt, EXCERPT_MAX)))
    return f"Step {step}: {what} {event.status}", blocks


def status_line(label: str, steps: int, elapsed_s: float) -> str:
    """The classic status line's text: what the run is doing, its steps and time."""
    return f"{label} · {steps} step{'s' if steps != 1 else ''} · {elapsed_s:.0f}s"


def note(text: str) -> tuple[str, list[dict[str, Any]]]:
    """A note in the thread as a message of its own (text and one section)."""
    return text, [section(text)]


def status(text: str, *, run_id: str | None) -> list[dict[str, Any]]:
    """The run's status line, with a Stop button while the run can be stopped."""
    return [section(text), stop_button(run_id)] if run_id else [section(text)]


def stop_button(run_id: str) -> dict[str, Any]:
    button = {
        "type": "button",
        "action_id": STOP_ACTION,
        "value": run_id,
        "style": "danger",
        "text": {"type": "plain_text", "text": "Stop"},
    }
    return {"type": "actions", "elements": [button]}


def footer(result: RunFinished, duration_s: float) -> str:
    """`5 turns · $0.0123 · 14s`, then how many channel notes shaped the answer and what
    holds of its figures, where there are any."""
    cost = f"${result.cost_usd:.4f}" if result.cost_usd is not None else "cost unknown"
    if result.budget_usd is not None:
        cost += f" of ${result.budget_usd:.2f}"
    turns = f"{result.turns} turn{'s' if result.turns != 1 else ''}"
    parts = [turns, cost, wording.took(duration_s, result.sandbox_wait_s)]
    if result.notes_used:
        parts.append(wording.notes_used(result.notes_used))
    if result.figures_note:
        parts.append(escape(result.figures_note))
    return " · ".join(parts)


def continue_button(
    text: str, key: str, allowance_usd: float, grant_id: str
) -> list[dict[str, Any]]:
    """A note with a button that goes on with a further allowance, once (`grant_id`)."""
    button = {
        "type": "button",
        "action_id": CONTINUE_ACTION,
        "value": f"{key}{GRANT_SEP}{grant_id}",
        "style": "primary",
        "text": {"type": "plain_text", "text": f"Continue (+${allowance_usd:.2f})"},
    }
    return [section(text), {"type": "actions", "elements": [button]}]


SHOW_WORK_ACTION = "show_work"
NOTEBOOK_ACTION = "notebook"


def work_buttons(run_id: str) -> dict[str, Any]:
    """Show work (a modal of where the answer's figures came from) and Notebook (the
    thread as a .ipynb); each names the run it is under."""

    def button(action_id: str, label: str) -> dict[str, Any]:
        text = {"type": "plain_text", "text": label}
        return {"type": "button", "action_id": action_id, "value": run_id, "text": text}

    elements = [
        button(SHOW_WORK_ACTION, wording.SHOW_WORK),
        button(NOTEBOOK_ACTION, wording.NOTEBOOK),
    ]
    return {"type": "actions", "elements": elements}


def answer_messages(
    result: RunFinished, duration_s: float, run_id: str | None = None
) -> list[tuple[str, list[dict[str, Any]]]]:
    """The answer as one or more messages of markdown blocks; the footer on the last, and
    with `run_id` (a run that ran steps) the Show work and Notebook buttons under it."""
    parts = markdown_split.split(result.answer)
    messages = []
    for i, part in enumerate(parts):
        blocks: list[dict[str, Any]] = [{"type": "markdown", "text": part or " "}]
        if i == len(parts) - 1:
            blocks.append(context(footer(result, duration_s)))
            if run_id:
                blocks.append(work_buttons(run_id))
        messages.append((clip(part, 3000) or "Answer", blocks))
    return messages


FEEDBACK_ACTION = "feedback"
FEEDBACK_BLOCK = "feedback:"  # + the run id, so a click names the run it rates


def feedback(run_id: str) -> dict[str, Any]:
    """Slack's thumbs up/down under an answer (a context_actions block)."""

    def button(label: str, value: str, said: str) -> dict[str, Any]:
        text = {"type": "plain_text", "text": label}
        return {"text": text, "value": value, "accessibility_label": said}

    element = {
        "type": "feedback_buttons",
        "action_id": FEEDBACK_ACTION,
        "positive_button": button("Good", "good", "Good answer"),
        "negative_button": button("Bad", "bad", "Bad answer"),
    }
    return {"type": "context_actions", "block_id": FEEDBACK_BLOCK + run_id, "elements": [element]}


def answer_end(
    result: RunFinished, duration_s: float, run_id: str, *, worked: bool = False
) -> list[dict[str, Any]]:
    """The blocks under a streamed answer: its footer, the Show work and Notebook buttons
    when the run ran steps (`worked`), and the feedback buttons."""
    work = [work_buttons(run_id)] if worked else []
    return [context(footer(result, duration_s)), *work, feedback(run_id)]


def markdown_posts(parts: list[str], blocks: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    """Markdown pieces as plain messages (text, blocks), `blocks` under the last."""
    parts = [p for p in parts if p.strip()] or [" "]
    last = len(parts) - 1
    return [(p[:3000], [{"type": "markdown", "text": p}, *(blocks if i == last else [])])
            for i, p in enumerate(parts)]  # fmt: skip


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif")


ALT_MAX = 1000  # characters of an image's alt text


def upload(name: str, content: bytes | Path, alt: str | None = None) -> dict[str, Any]:
    """One file for SlackWeb.upload (its bytes, or the host file holding them); an image
    gets alt text (`alt`: what its chart shows), so it shows inline and is described to
    screen readers."""
    item: dict[str, Any] = {"content": content, "filename": name, "title": name}
    if name.lower().endswith(IMAGE_SUFFIXES):
        said = alt or f"Chart from the analysis: {name.rsplit('.', 1)[0]}"
        item["alt_txt"] = said[:ALT_MAX]
    return item
