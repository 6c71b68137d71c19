"""The Slack blocks for results as data: a table as a `data_table` block (or, where that is
refused, a `table` block, then aligned monospace text). A chart's `data_visualization` block
is `bot/results/chart_blocks.py`'s, shared with the terminal. Pure: no I/O, no state.
Limits are the strictest the sources give (docs revision A): 100 data rows, 20 columns,
10,000 characters over a table's cells; one table and two charts a message.

Every text is measured as Slack will get it: the way out (web/outgoing.py) escapes `<!…>`
mentions, which makes `<!x>` 10 characters instead of 4, so that escaping is done here
first (it does nothing the second time)."""

from __future__ import annotations

from typing import Any

from bot.results.chart_blocks import cut, json_number
from bot.results.mentions import inert
from bot.results.tables import Table, monospace, number_columns, parse_number
from bot.slack.render import wording
from bot.slack.render.block_kit import escape

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
    return {"type": "raw_text", "text": cut(text.strip(), limit) or " "}


def _number_cell(text: str, limit: int) -> Block:
    value = parse_number(text)
    if value is None:  # an empty cell in a column of numbers
        return _text_cell(text, limit)
    return {"type": "raw_number", "value": json_number(value), "text": cut(text.strip(), limit)}


def _chars(cells: list[Block]) -> int:
    return sum(len(c["text"]) for c in cells)


def _caption(caption: str) -> str:
    return cut(" ".join(caption.split()), CAPTION_MAX) or wording.TABLE_CAPTION


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
    return escape(cut(csv_name.strip(), NOTE_NAME_MAX)) if csv_name and csv_name.strip() else None


# --- charts --------------------------------------------------------------------------------
