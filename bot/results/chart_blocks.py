"""A chart the kernel recorded as Slack's `data_visualization` block, or the reason it does
not fit one. Pure: no I/O, no state. The Slack front end posts the block; the terminal tells
whether Slack could draw the chart. Limits are the strictest the sources give: 6 series,
20 categories, 6 slices, names of 20 characters.

Every text is measured as Slack will get it: the way out escapes `<!…>` mentions (`inert`),
which makes `<!x>` 10 characters instead of 4, so that escaping is done here first (it does
nothing the second time)."""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath
from typing import Any

from bot.results.charts import Chart
from bot.results.mentions import inert

Block = dict[str, Any]

TITLE_MAX = 50
AXIS_LABEL_MAX = 50
NAME_MAX = 20  # series names, categories, slice labels
SERIES_MAX = 6
CATEGORIES_MAX = 20
SEGMENTS_MAX = 6
CHART_TYPES = {"bar": "bar", "barh": "bar", "line": "line", "area": "area", "pie": "pie"}

CHART_KIND_UNKNOWN = "Slack has no chart of this kind"
CHART_NO_SERIES = "it has no data series"
CHART_TOO_MANY_SERIES = "Slack draws at most {limit} series"
CHART_NO_CATEGORIES = "it has no categories"
CHART_TOO_MANY_CATEGORIES = "Slack draws at most {limit} categories"
CHART_NAMES_CLASH = "its series names are the same once shortened to {limit} characters"
CHART_CATEGORIES_CLASH = "its categories are the same once shortened to {limit} characters"
CHART_EMPTY_CATEGORY = "a category has no name"
CHART_GAP = "a series has no number for some category"
CHART_NO_SEGMENTS = "it has no slices"
CHART_TOO_MANY_SEGMENTS = "Slack draws at most {limit} slices"
CHART_NOT_POSITIVE = "a slice is zero or negative"
CHART_FITS = "Slack-drawable"


PART_ENTITY = re.compile(r"&[a-z]*$")  # `&lt;` cut short: dropped whole, never shown half


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return PART_ENTITY.sub("", text[: limit - 1]) + "…"


def _shown(text: str, limit: int) -> str:
    """A chart's text as Slack gets it, within `limit`."""
    return cut(inert(text), limit)


class _NoFit(Exception):
    """The chart breaks one of the block's rules; the message says which."""


def chart_block(chart: Chart) -> tuple[Block | None, str]:
    """The `data_visualization` block for a chart, or None and why it does not fit one."""
    chart_type = CHART_TYPES.get(chart.kind)
    if chart_type is None:
        return None, CHART_KIND_UNKNOWN
    try:
        body = _pie(chart) if chart_type == "pie" else _series_chart(chart, chart_type)
    except _NoFit as why:
        return None, str(why)
    block = {"type": "data_visualization", "title": _title(chart), "chart": body}
    return block, CHART_FITS


def _title(chart: Chart) -> str:
    title = chart.title or chart.y_label or PurePosixPath(chart.image).stem or "Chart"
    return _shown(title, TITLE_MAX)


def _pie(chart: Chart) -> Block:
    if not chart.segments:
        raise _NoFit(CHART_NO_SEGMENTS)
    if len(chart.segments) > SEGMENTS_MAX:
        raise _NoFit(CHART_TOO_MANY_SEGMENTS.format(limit=SEGMENTS_MAX))
    segments = []
    for n, segment in enumerate(chart.segments, start=1):
        if not (math.isfinite(segment.value) and segment.value > 0):
            raise _NoFit(CHART_NOT_POSITIVE)
        label = _shown(segment.label or f"Slice {n}", NAME_MAX)
        segments.append({"label": label, "value": json_number(segment.value)})
    return {"type": "pie", "segments": segments}


def _series_chart(chart: Chart, chart_type: str) -> Block:
    if not chart.series:
        raise _NoFit(CHART_NO_SERIES)
    if len(chart.series) > SERIES_MAX:
        raise _NoFit(CHART_TOO_MANY_SERIES.format(limit=SERIES_MAX))
    if not chart.categories:
        raise _NoFit(CHART_NO_CATEGORIES)
    if len(chart.categories) > CATEGORIES_MAX:
        raise _NoFit(CHART_TOO_MANY_CATEGORIES.format(limit=CATEGORIES_MAX))
    if not all(c.strip() for c in chart.categories):
        raise _NoFit(CHART_EMPTY_CATEGORY)
    names = _unique(
        [s.name or f"Series {n}" for n, s in enumerate(chart.series, start=1)],
        CHART_NAMES_CLASH,
    )
    categories = _unique(list(chart.categories), CHART_CATEGORIES_CLASH)
    series = []
    for name, each in zip(names, chart.series, strict=True):
        if len(each.values) != len(categories) or not all(_finite(v) for v in each.values):
            raise _NoFit(CHART_GAP)
        points = [
            {"label": c, "value": json_number(v)}
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


def json_number(value: float) -> int | float:
    """12.0 is sent as 12 (exactly, while a float holds it exactly)."""
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
