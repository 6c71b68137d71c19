"""Slack's data blocks as the fake checks them: ``table``, ``data_table`` and
``data_visualization``, one by one and per message.

Problems are worded like Slack's ``response_metadata.messages`` (kit.py's ``Bad``). The
sources disagree on several limits; each such rule is a field of ``SurfaceRules`` and the
default is the stricter reading:

- ``table``: 1–100 rows of 1–20 cells, cells ``raw_text`` or ``rich_text`` (``raw_number``
  too, ``table_raw_number``), ``column_settings`` of at most 20 items (``null`` items allowed,
  ``null_column_settings``), at most 10,000 characters of cell text (``table_char_budget``).
  Only one ``table`` per message: ``invalid_attachments`` with ``only_one_table_allowed``.
  ``legacy_tables`` refuses a table in the top-level ``blocks`` (early reports said
  ``attachments[].blocks`` only).
- ``data_table``: a caption; 2–101 rows (revision "B": 2–201) of 1–20 cells, all rows the
  same length; no ``rich_text`` in the header row; ``raw_number`` needs a JSON number
  ``value`` and a ``text`` (``raw_number_text_required``); ``page_size`` 1–100;
  ``row_header_column_index`` within the columns; at most 10,000 characters (revision B:
  20,000) per table and across the table-family cells of the message.
- ``data_visualization``: a 1–50 character title and a chart of type pie, bar, area or
  line; pie: 1–6 segments (``chart_max_series``) with a 1–20 character label and a value
  above 0; bar, area and line: 1–6 uniquely named series of 1–20 points whose labels are
  ``axis_config.categories``, each series covering every category once
  (``full_coverage``). At most two charts per message.
- At most one table-family block (``table`` and ``data_table``) per message
  (``one_table_family``).
- ``markdown_per_block``: the 12,000-character markdown budget is per block rather than
  shared by the message's markdown blocks (``msg_blocks_too_long``).
- ``refuse_blocks``: block types the workspace does not have yet (a phased rollout); in a
  streamed message the data blocks are refused unless ``stream_data_blocks``, as the docs
  do not say that streams take them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Bad = Callable[[str, str], None]  # (json pointer, what is wrong)
Json = dict[str, Any]
Located = list[tuple[str, Json]]  # (json pointer of the block, the block)

TABLE_FAMILY = frozenset({"table", "data_table"})
DATA_BLOCKS = TABLE_FAMILY | {"data_visualization"}
ONLY_ONE_TABLE = "only_one_table_allowed"
MAX_TABLE_ROWS = 100
MAX_CELLS = 20
MAX_TABLE_CHARS = 10_000
ALIGNS = frozenset({"left", "center", "right"})
DATA_TABLE_LIMITS = {"A": (101, 10_000), "B": (201, 20_000)}  # revision: (rows, characters)
MAX_PAGE_SIZE = 100
MAX_TITLE = 50
MAX_LABEL = 20
MAX_POINTS = 20
MAX_AXIS_LABEL = 50
MAX_CHARTS = 2
CHART_TYPES = frozenset({"pie", "bar", "area", "line"})


@dataclass(frozen=True)
class SurfaceRules:
    """The switches of the data-block rules; defaults are the stricter readings."""

    refuse_blocks: frozenset[str] = frozenset()
    data_table_revision: str = "A"
    chart_max_series: int = 6
    stream_data_blocks: bool = False
    table_raw_number: bool = True
    null_column_settings: bool = True
    table_char_budget: bool = True
    legacy_tables: bool = False
    raw_number_text_required: bool = True
    one_table_family: bool = True
    full_coverage: bool = True
    markdown_per_block: bool = False  # True: 12,000 per markdown block, not per message
    in_stream: bool = False  # set by the fake for the stream methods

    def __post_init__(self) -> None:
        if self.data_table_revision not in DATA_TABLE_LIMITS:
            raise ValueError(f"data_table_revision must be one of {sorted(DATA_TABLE_LIMITS)}")

    @property
    def max_data_table_rows(self) -> int:
        return DATA_TABLE_LIMITS[self.data_table_revision][0]

    @property
    def char_budget(self) -> int:
        return DATA_TABLE_LIMITS[self.data_table_revision][1]

    def refusal(self, kind: str, *, in_attachment: bool) -> str | None:
        """Why a block of type `kind` is refused outright, or None."""
        if kind in self.refuse_blocks:
            return f"unsupported block type: {kind}"
        if self.in_stream and not self.stream_data_blocks and kind in DATA_BLOCKS:
            return f"block type not supported in streamed messages: {kind}"
        if kind == "table" and self.legacy_tables and not in_attachment:
            return "table blocks are only allowed in attachments"
        return None


DEFAULT_RULES = SurfaceRules()


# -- small checks


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _string(path: str, value: Any, bad: Bad, limit: int | None = None) -> bool:
    if not isinstance(value, str) or not value:
        bad(path, "must be a non-empty string")
        return False
    if limit is not None and len(value) > limit:
        bad(path, f"must be less than {limit + 1} characters")
        return False
    return True


def _items(path: str, value: Any, bad: Bad, low: int, high: int) -> list[Any]:
    if not isinstance(value, list) or len(value) < low:
        bad(path, f"must provide at least {low} item{'s' * (low > 1)}")
        return value if isinstance(value, list) else []
    if len(value) > high:
        bad(path, f"no more than {high} items allowed")
    return value


def _rich_text_chars(node: Any) -> int:
    """Characters a rich_text cell shows: every ``text`` string in it."""
    if isinstance(node, list):
        return sum(_rich_text_chars(n) for n in node)
    if not isinstance(node, dict):
        return 0
    own = len(node["text"]) if isinstance(node.get("text"), str) else 0
    return own + _rich_text_chars(node.get("elements"))


def cell_chars(block: Json) -> int:
    """The characters across all cells of a table-family block."""
    total = 0
    for row in block.get("rows") or []:
        for cell in row if isinstance(row, list) else []:
            if not isinstance(cell, dict):
                continue
            if cell.get("type") == "rich_text":
                total += _rich_text_chars(cell.get("elements"))
            elif isinstance(cell.get("text"), str):
                total += len(cell["text"])
    return total


# -- cells


def _cell(path: str, cell: Any, bad: Bad, kinds: frozenset[str], rules: SurfaceRules) -> None:
    kind = cell.get("type") if isinstance(cell, dict) else None
    if kind not in kinds:
        bad(f"{path}/type", f"must be one of {sorted(kinds)}")
        return
    if kind == "raw_text":
        _string(f"{path}/text", cell.get("text"), bad)
    elif kind == "raw_number":
        if not _is_number(cell.get("value")):
            bad(f"{path}/value", "must be a number")
        if "text" in cell or rules.raw_number_text_required:
            _string(f"{path}/text", cell.get("text"), bad)
    elif not isinstance(cell.get("elements"), list) or not cell["elements"]:
        bad(f"{path}/elements", "must provide at least 1 item")


def _column_settings(path: str, block: Json, bad: Bad, rules: SurfaceRules) -> None:
    if "column_settings" not in block:
        return
    for j, item in enumerate(_items(path, block["column_settings"], bad, 0, MAX_CELLS)):
        if item is None and rules.null_column_settings:
            continue
        if not isinstance(item, dict):
            bad(f"{path}/{j}", "must be an object")
            continue
        if "align" in item and item["align"] not in ALIGNS:
            bad(f"{path}/{j}/align", f"must be one of {sorted(ALIGNS)}")
        if "is_wrapped" in item and not isinstance(item["is_wrapped"], bool):
            bad(f"{path}/{j}/is_wrapped", "must be a boolean")


# -- blocks


def table(path: str, block: Json, bad: Bad, rules: SurfaceRules) -> None:
    kinds = {"raw_text", "rich_text"} | ({"raw_number"} if rules.table_raw_number else set())
    rows = _items(f"{path}/rows", block.get("rows"), bad, 1, MAX_TABLE_ROWS)
    for r, row in enumerate(rows):
        cells = _items(f"{path}/rows/{r}", row, bad, 1, MAX_CELLS)
        for c, cell in enumerate(cells):
            _cell(f"{path}/rows/{r}/{c}", cell, bad, frozenset(kinds), rules)
    _column_settings(f"{path}/column_settings", block, bad, rules)
    if rules.table_char_budget and cell_chars(block) > MAX_TABLE_CHARS:
        bad(f"{path}/rows", f"cells must hold no more than {MAX_TABLE_CHARS} characters")


def data_table(path: str, block: Json, bad: Bad, rules: SurfaceRules) -> None:
    _string(f"{path}/caption", block.get("caption"), bad)
    rows = _items(f"{path}/rows", block.get("rows"), bad, 2, rules.max_data_table_rows)
    width = len(rows[0]) if rows and isinstance(rows[0], list) else 0
    for r, row in enumerate(rows):
        cells = _items(f"{path}/rows/{r}", row, bad, 1, MAX_CELLS)
        if len(cells) != width:
            bad(f"{path}/rows/{r}", f"every row must have {width} cells, like the header row")
        kinds = {"raw_text", "raw_number"} | ({"rich_text"} if r else set())
        for c, cell in enumerate(cells):
            _cell(f"{path}/rows/{r}/{c}", cell, bad, frozenset(kinds), rules)
    page_size = block.get("page_size")
    if page_size is not None and not (_is_int(page_size) and 1 <= page_size <= MAX_PAGE_SIZE):
        bad(f"{path}/page_size", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
    index = block.get("row_header_column_index")
    if index is not None and not (_is_int(index) and 0 <= index < max(width, 1)):
        bad(f"{path}/row_header_column_index", f"must be an integer from 0 to {width - 1}")
    if cell_chars(block) > rules.char_budget:
        bad(f"{path}/rows", f"cells must hold no more than {rules.char_budget} characters")


def _pie(path: str, chart: Json, bad: Bad, rules: SurfaceRules) -> None:
    segments = _items(f"{path}/segments", chart.get("segments"), bad, 1, rules.chart_max_series)
    for j, segment in enumerate(segments):
        if not isinstance(segment, dict):
            bad(f"{path}/segments/{j}", "must be an object")
            continue
        _string(f"{path}/segments/{j}/label", segment.get("label"), bad, MAX_LABEL)
        value = segment.get("value")
        if not (_is_number(value) and value > 0):
            bad(f"{path}/segments/{j}/value", "must be a number greater than 0")
    for key in ("series", "axis_config"):
        if key in chart:
            bad(f"{path}/{key}", "not allowed in a pie chart")


def _categories(path: str, chart: Json, bad: Bad) -> list[str]:
    axis = chart.get("axis_config")
    if not isinstance(axis, dict):
        bad(path, "missing required field: axis_config")
        return []
    categories = _items(f"{path}/axis_config/categories", axis.get("categories"), bad, 1, 10**6)
    for j, category in enumerate(categories):
        _string(f"{path}/axis_config/categories/{j}", category, bad, MAX_LABEL)
    for key in ("x_label", "y_label"):
        if key in axis:
            _string(f"{path}/axis_config/{key}", axis[key], bad, MAX_AXIS_LABEL)
    return [c for c in categories if isinstance(c, str)]


def _series_chart(path: str, chart: Json, bad: Bad, rules: SurfaceRules) -> None:
    categories = _categories(path, chart, bad)
    series = _items(f"{path}/series", chart.get("series"), bad, 1, rules.chart_max_series)
    names: set[str] = set()
    for j, one in enumerate(series):
        here = f"{path}/series/{j}"
        if not isinstance(one, dict):
            bad(here, "must be an object")
            continue
        name = one.get("name")
        if _string(f"{here}/name", name, bad, MAX_LABEL) and name in names:
            bad(f"{here}/name", f"duplicate series name: {name}")
        names.add(str(name))
        labels = _points(here, one, bad, categories)
        if rules.full_coverage and categories and Counter(labels) != Counter(set(categories)):
            bad(f"{here}/data", "must hold exactly one point for each category")


def _points(path: str, series: Json, bad: Bad, categories: list[str]) -> list[Any]:
    labels = []
    for k, point in enumerate(_items(f"{path}/data", series.get("data"), bad, 1, MAX_POINTS)):
        if not isinstance(point, dict):
            bad(f"{path}/data/{k}", "must be an object")
            continue
        label = point.get("label")
        labels.append(label)
        if _string(f"{path}/data/{k}/label", label, bad, MAX_LABEL) and label not in categories:
            bad(f"{path}/data/{k}/label", "must match one of axis_config.categories")
        if not _is_number(point.get("value")):
            bad(f"{path}/data/{k}/value", "must be a finite number")
    return labels


def data_visualization(path: str, block: Json, bad: Bad, rules: SurfaceRules) -> None:
    _string(f"{path}/title", block.get("title"), bad, MAX_TITLE)
    chart = block.get("chart")
    if not isinstance(chart, dict):
        bad(f"{path}/chart", "must be an object")
        return
    kind = chart.get("type")
    if kind not in CHART_TYPES:
        bad(f"{path}/chart/type", f"must be one of {sorted(CHART_TYPES)}")
    elif kind == "pie":
        _pie(f"{path}/chart", chart, bad, rules)
    else:
        _series_chart(f"{path}/chart", chart, bad, rules)


SURFACE_BLOCKS: dict[str, Callable[[str, Json, Bad, SurfaceRules], None]] = {
    "table": table,
    "data_table": data_table,
    "data_visualization": data_visualization,
}


# -- per message


def message_problems(located: Located, rules: SurfaceRules, bad: Bad) -> None:
    """The rules over a message's blocks together (its own and its attachments')."""
    tables = [path for path, block in located if block.get("type") == "table"]
    family = [(p, b) for p, b in located if b.get("type") in TABLE_FAMILY]
    charts = [path for path, block in located if block.get("type") == "data_visualization"]
    for path in tables[1:]:
        bad(path, ONLY_ONE_TABLE)
    if rules.one_table_family and len(family) > 1 and len(tables) < 2:
        bad(family[1][0], "only one table or data_table block allowed per message")
    for path in charts[MAX_CHARTS:]:
        bad(path, f"no more than {MAX_CHARTS} data_visualization blocks allowed per message")
    counted = [b for _, b in family if b["type"] == "data_table" or rules.table_char_budget]
    if len(counted) > 1 and sum(cell_chars(b) for b in counted) > rules.char_budget:
        budget = rules.char_budget
        bad(family[-1][0], f"table cells of a message must hold no more than {budget} characters")
