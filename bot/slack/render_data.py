"""The Slack blocks for results as data: a table as a `data_table` block (or, where that is
refused, a `table` block, then aligned monospace text), and a chart the kernel recorded as
a `data_visualization` block, or the reason it does not fit one. Pure: no I/O, no state.
Limits are the strictest the sources give (docs revision A): 100 data rows, 20 columns,
10,000 characters over a table's cells, 6 series; one table and two charts a message.

Every text is measured as Slack will get it: the way out (web/outgoing.py) escapes `<!…>`
mentions, which makes `<!x>` 10 characters instead of 4, so that escaping is done here
first (it does nothing the second time)."""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath
from typing import Any

from bot.results.charts import Chart
from bot.results.tables import Table, monospace, number_columns, parse_number
from bot.slack import wording
from bot.slack.render import escape
from bot.slack.web.outgoing import inert

TABLE_KINDS = ("data_table", "table", "monospace")  # the order to fall back in
tables_per_message = 1  # one table-family block (`table` or `data_table`) a message
charts_per_message = 2

COLUMNS_MAX = 20
BODY_ROWS = {"data_table": 100, "table": 99}  # 101 and 100 rows with the header
CELLS_CHARS = 10_000  # over all of a table's cells, header included
CELL_MAX = 500
CAPTION_MAX = 200
PAGE_SIZE = 10
MONOSPACE_MAX = 2900
NOTE_NAME_MAX = 200

TITLE_MAX = 50
AXIS_LABEL_MAX = 50
NAME_MAX = 20  # series names, categories, slice labels
SERIES_MAX = 6
CATEGORIES_MAX = 20
SEGMENTS_MAX = 6
CHART_TYPES = {"bar": "bar", "barh": "bar", "line": "line", "area": "area", "pie": "pie"}

Block = dict[str, Any]


# --- tables --------------------------------------------------------------------------------


def table_blocks(table: Table, kind: str, *, csv_name: str | None) -> tuple[list[Block], bool]:
    """The blocks for one table in the given kind, and whether rows or columns were cut
    (then the last block says so, and names `csv_name` when the whole table is attached)."""
    if kind not in TABLE_KINDS:
        raise ValueError(f"unknown table kind {kind!r}")
    if not table.header:
        raise ValueError("a table needs at least one column")
    table = _inert_table(table)
    if kind == "monospace" or not table.rows:
        blocks, shown = _monospace_blocks(table)
        columns = len(table.header)
    else:
        block, shown, columns = _grid_block(table, kind)
        blocks = [block]
    capped = shown < table.total_rows or columns < len(table.header)
    if capped:
        note = wording.table_capped(
            shown, table.total_rows, _note_name(csv_name), (columns, len(table.header))
        )
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": note}]})
    return blocks, capped


def _inert_table(table: Table) -> Table:
    """The table as it will reach Slack, so that its limits are measured on that."""
    rows = tuple(tuple(inert(c) for c in row) for row in table.rows)
    header = tuple(inert(h) for h in table.header)
    return Table(inert(table.caption), header, rows, table.total_rows)


def _grid_block(table: Table, kind: str) -> tuple[Block, int, int]:
    """A `data_table` or `table` block within the row, column and character limits:
    (block, body rows shown, columns shown)."""
    columns = min(len(table.header), COLUMNS_MAX)
    numeric = number_columns(table)[:columns]
    header = table.header[:columns]
    body = [(*row, *[""] * columns)[:columns] for row in table.rows[: BODY_ROWS[kind]]]
    cell_max = _cell_max(header, body[0])
    rows = [[_text_cell(h, cell_max) for h in header]]
    used = _chars(rows[0])
    for row in body:
        cells = [
            _number_cell(v, cell_max)
            if numeric[i] and kind == "data_table"
            else _text_cell(v, cell_max)
            for i, v in enumerate(row)
        ]
        if used + _chars(cells) > CELLS_CHARS:
            break
        rows.append(cells)
        used += _chars(cells)
    shown = len(rows) - 1
    if kind == "data_table":
        block: Block = {
            "type": "data_table",
            "caption": _caption(table.caption),
            "page_size": min(PAGE_SIZE, shown),
            "row_header_column_index": 0,
            "rows": rows,
        }
    else:
        settings = [{"align": "right" if n else "left"} for n in numeric]
        block = {"type": "table", "column_settings": settings, "rows": rows}
    return block, shown, columns


def _cell_max(header: tuple[str, ...], first: tuple[str, ...]) -> int:
    """500 characters a cell, or fewer when the header and one row would not fit."""
    full = sum(min(len(c), CELL_MAX) or 1 for c in (*header, *first))
    return CELL_MAX if full <= CELLS_CHARS else CELLS_CHARS // (2 * len(header))


def _text_cell(text: str, limit: int) -> Block:
    return {"type": "raw_text", "text": _clip(text.strip(), limit) or " "}


def _number_cell(text: str, limit: int) -> Block:
    value = parse_number(text)
    if value is None:  # an empty cell in a column of numbers
        return _text_cell(text, limit)
    return {"type": "raw_number", "value": _json_number(value), "text": _clip(text.strip(), limit)}


def _chars(cells: list[Block]) -> int:
    return sum(len(c["text"]) for c in cells)


def _caption(caption: str) -> str:
    return _clip(" ".join(caption.split()), CAPTION_MAX) or wording.TABLE_CAPTION


def _monospace_blocks(table: Table) -> tuple[list[Block], int]:
    """A bold caption over the aligned text; and how many rows that shows."""
    text, shown = monospace(table, MONOSPACE_MAX)
    caption = {"type": "text", "text": _caption(table.caption) + "\n", "style": {"bold": True}}
    block = {
        "type": "rich_text",
        "elements": [
            {"type": "rich_text_section", "elements": [caption]},
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": text}]},
        ],
    }
    return [block], shown


def _note_name(csv_name: str | None) -> str | None:
    return escape(_clip(csv_name.strip(), NOTE_NAME_MAX)) if csv_name and csv_name.strip() else None


PART_ENTITY = re.compile(r"&[a-z]*$")  # `&lt;` cut short: dropped whole, never shown half


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return PART_ENTITY.sub("", text[: limit - 1]) + "…"


def _shown(text: str, limit: int) -> str:
    """A chart's text as Slack gets it, within `limit`."""
    return _clip(inert(text), limit)


# --- charts --------------------------------------------------------------------------------


class _NoFit(Exception):
    """The chart breaks one of the block's rules; the message says which."""


def chart_block(chart: Chart) -> tuple[Block | None, str]:
    """The `data_visualization` block for a chart, or None and why it does not fit one."""
    chart_type = CHART_TYPES.get(chart.kind)
    if chart_type is None:
        return None, wording.CHART_KIND_UNKNOWN
    try:
        body = _pie(chart) if chart_type == "pie" else _series_chart(chart, chart_type)
    except _NoFit as why:
        return None, str(why)
    block = {"type": "data_visualization", "title": _title(chart), "chart": body}
    return block, wording.CHART_FITS


def _title(chart: Chart) -> str:
    title = chart.title or chart.y_label or PurePosixPath(chart.image).stem or "Chart"
    return _shown(title, TITLE_MAX)


def _pie(chart: Chart) -> Block:
    if not chart.segments:
        raise _NoFit(wording.CHART_NO_SEGMENTS)
    if len(chart.segments) > SEGMENTS_MAX:
        raise _NoFit(wording.CHART_TOO_MANY_SEGMENTS.format(limit=SEGMENTS_MAX))
    segments = []
    for n, segment in enumerate(chart.segments, start=1):
        if not (math.isfinite(segment.value) and segment.value > 0):
            raise _NoFit(wording.CHART_NOT_POSITIVE)
        label = _shown(segment.label or f"Slice {n}", NAME_MAX)
        segments.append({"label": label, "value": _json_number(segment.value)})
    return {"type": "pie", "segments": segments}


def _series_chart(chart: Chart, chart_type: str) -> Block:
    if not chart.series:
        raise _NoFit(wording.CHART_NO_SERIES)
    if len(chart.series) > SERIES_MAX:
        raise _NoFit(wording.CHART_TOO_MANY_SERIES.format(limit=SERIES_MAX))
    if not chart.categories:
        raise _NoFit(wording.CHART_NO_CATEGORIES)
    if len(chart.categories) > CATEGORIES_MAX:
        raise _NoFit(wording.CHART_TOO_MANY_CATEGORIES.format(limit=CATEGORIES_MAX))
    if not all(c.strip() for c in chart.categories):
        raise _NoFit(wording.CHART_EMPTY_CATEGORY)
    names = _unique(
        [s.name or f"Series {n}" for n, s in enumerate(chart.series, start=1)],
        wording.CHART_NAMES_CLASH,
    )
    categories = _unique(list(chart.categories), wording.CHART_CATEGORIES_CLASH)
    series = []
    for name, each in zip(names, chart.series, strict=True):
        if len(each.values) != len(categories) or not all(_finite(v) for v in each.values):
            raise _NoFit(wording.CHART_GAP)
        points = [
            {"label": c, "value": _json_number(v)}
            for c, v in zip(categories, each.values, strict=True)
            if v is not None
        ]
        series.append({"name": name, "data": points})
    axis: Block = {"categories": categories}
    if chart.x_label:
        axis["x_label"] = _shown(chart.x_label, AXIS_LABEL_MAX)
    if chart.y_label:
        axis["y_label"] = _shown(chart.y_label, AXIS_LABEL_MAX)
    return {"type": chart_type, "series": series, "axis_config": axis}


def _unique(texts: list[str], clash: str) -> list[str]:
    """Each clipped to 20 characters; two that were distinct must stay distinct."""
    clipped = [_shown(t, NAME_MAX) for t in texts]
    if len(set(clipped)) != len(clipped):
        raise _NoFit(clash.format(limit=NAME_MAX))
    return clipped


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _json_number(value: float) -> int | float:
    """12.0 is sent as 12 (exactly, while a float holds it exactly)."""
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
