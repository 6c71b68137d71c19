"""The report as a Slack canvas: its title, its Markdown as canvases take it, and the
block that links it in the thread. Pure: no I/O.

Canvases take a Markdown of their own (headings, lists, tables, links, no images) and
refuse a document with a list inside a block quote, so the report is adapted before it
is sent: images become a line saying the chart is in the thread, and list items inside
quotes lose their marker."""

from __future__ import annotations

import re
from typing import Any

from bot.results.markdown import without_images

CANVAS_MAX = 1_048_576  # characters in one canvas document (canvases.create, canvases.edit)
TITLE_MAX = 150
DEFAULT_TITLE = "Analysis report"
QUOTED_ITEM = re.compile(r"^(\s*>\s*)(?:[-*+]|\d+[.)])\s+", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def title(report: str) -> str:
    """The report's first heading, else a plain title."""
    match = HEADING.search(report)
    text = re.sub(r"[*_`]", "", match.group(1)).strip() if match else ""
    return (text or DEFAULT_TITLE)[:TITLE_MAX]


def markdown(report: str) -> str | None:
    """`report` as a canvas document, or None when it is too big for one."""
    text = without_images(report, lambda alt: f"_Chart: {alt or 'see the thread'} (in the thread)_")
    text = QUOTED_ITEM.sub(lambda m: m.group(1), text)
    return text if 0 < len(text) <= CANVAS_MAX else None


def link(canvas_id: str) -> dict[str, Any]:
    """A rich_text block naming the canvas (Slack draws it as the canvas's card)."""
    section = {
        "type": "rich_text_section",
        "elements": [
            {"type": "text", "text": "Report: "},
            {"type": "canvas", "file_id": canvas_id},
        ],
    }
    return {"type": "rich_text", "elements": [section]}
