"""The host's reader of the chart data the kernel writes beside each saved figure
(`<stem>.chart.json`), and its text summary (alt text, fallback text). The kernel runs
model-written code, so the bytes are hostile: anything off the schema is refused whole."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

MAX_BYTES = 512 * 1024
MAX_TEXT = 200
MAX_SERIES = 50
MAX_CATEGORIES = 1000
MAX_SEGMENTS = 100
MAX_DEPTH = 4  # object → series list → series object → values list
KINDS = ("line", "bar", "barh", "area", "pie", "unknown")
KIND_NAMES = {"bar": "Bar", "barh": "Bar", "line": "Line", "area": "Area", "pie": "Pie"}
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f]")


@dataclass(frozen=True)
class Series:
    name: str
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class Segment:
    label: str
    value: float


@dataclass(frozen=True)
class Chart:
    version: int
    image: str  # the PNG's file name, beside the JSON
    kind: str
    title: str
    x_label: str
    y_label: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    segments: tuple[Segment, ...]
    note: str


class _Refused(Exception):
    """The data is off the schema."""


def parse_chart(data: bytes) -> Chart | None:
    """The chart the bytes describe, or None for anything off the schema."""
    if len(data) > MAX_BYTES or _nesting(data) > MAX_DEPTH:
        return None
    try:
        raw = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        return _chart(raw)
    except (UnicodeDecodeError, ValueError, _Refused):
        return None


STRING = re.compile(rb'"(?:\\.|[^"\\])*"')
BRACKET = re.compile(rb"[\[\]{}]")


def _nesting(data: bytes) -> int:
    """How deep the JSON's brackets go, read before any parsing: json.loads recurses, and
    a RecursionError it raises leaves CPython 3.11's parser counters off (a later
    ast.parse in the process, a traceback's say, then fails)."""
    depth = deepest = 0
    for bracket in BRACKET.findall(STRING.sub(b'""', data)):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number")


def _chart(raw: Any) -> Chart:
    obj = _object(raw)
    version = obj.get("version")
    if type(version) is not int or version != 1:
        raise _Refused("version")
    image = _text(obj.get("image"))
    if not image or "/" in image or "\\" in image or image in (".", ".."):
        raise _Refused("image")
    kind = obj.get("kind")
    if kind not in KINDS:
        raise _Refused("kind")
    categories = tuple(_text(c) for c in _array(obj.get("categories", []), MAX_CATEGORIES))
    series = tuple(_series(s, len(categories)) for s in _array(obj.get("series", []), MAX_SERIES))
    segments = tuple(_segment(s) for s in _array(obj.get("segments", []), MAX_SEGMENTS))
    return Chart(
        version=version,
        image=image,
        kind=kind,
        title=_text(obj.get("title", "")),
        x_label=_text(obj.get("x_label", "")),
        y_label=_text(obj.get("y_label", "")),
        categories=categories,
        series=series,
        segments=segments,
        note=_text(obj.get("note", "")),
    )


def _series(raw: Any, categories: int) -> Series:
    obj = _object(raw)
    values = tuple(
        None if v is None else _number(v) for v in _array(obj.get("values"), MAX_CATEGORIES)
    )
    if len(values) != categories:
        raise _Refused("a series needs one value per category")
    return Series(_text(obj.get("name", "")), values)


def _segment(raw: Any) -> Segment:
    obj = _object(raw)
    return Segment(_text(obj.get("label", "")), _number(obj.get("value")))


def _object(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _Refused("not an object")
    return raw


def _array(raw: Any, limit: int) -> list[Any]:
    if not isinstance(raw, list) or len(raw) > limit:
        raise _Refused("not a list, or too long")
    return raw


def _number(raw: Any) -> float:
    if type(raw) not in (int, float):  # bool is an int subclass: refused here
        raise _Refused("not a number")
    try:
        value = float(raw)
    except OverflowError as err:  # an integer too big for a float
        raise _Refused("number too big") from err
    if not math.isfinite(value):  # 1e999 parses as inf
        raise _Refused("not finite")
    return value


def _text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise _Refused("not a string")
    cleaned = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in raw)
    cleaned = " ".join(_BIDI.sub("", cleaned).split())
    return cleaned[:MAX_TEXT]


# --- text summary --------------------------------------------------------------------------


def describe(chart: Chart, limit: int = 1000) -> str:
    """e.g. "Bar chart: Population 2000–2020 (people). India 350,001,234; China 140,002,000;
    …": the title and as many of the key numbers as fit in `limit` characters."""
    kind = KIND_NAMES.get(chart.kind)
    head = f"{kind} chart" if kind else "Chart"
    title = chart.title or chart.y_label
    if title:
        head += f": {title}"
    if chart.y_label and chart.y_label != title:
        head += f" ({chart.y_label})"
    head += "."
    items = _items(chart)
    if len(head) >= limit or not items:
        return head if len(head) <= limit else head[: max(0, limit - 1)] + "…"
    text = head
    for n, item in enumerate(items):
        piece = (" " if n == 0 else "; ") + item
        more = n + 1 < len(items)
        if len(text) + len(piece) + (len("; …") if more else 0) > limit:
            ellipsis = " …" if n == 0 else "; …"
            return text + ellipsis if len(text) + len(ellipsis) <= limit else text
        text += piece
    return text


def _items(chart: Chart) -> list[str]:
    if chart.segments:
        return [f"{s.label or '?'} {number_text(s.value)}" for s in chart.segments]
    if len(chart.series) == 1:
        values = chart.series[0].values
        return [f"{c} {number_text(v)}" for c, v in zip(chart.categories, values, strict=True)]
    items = []
    for i, series in enumerate(chart.series, start=1):
        name = series.name or f"Series {i}"
        for n, (c, v) in enumerate(zip(chart.categories, series.values, strict=True)):
            items.append(f"{name}: {c} {number_text(v)}" if n == 0 else f"{c} {number_text(v)}")
    return items


def number_text(value: float | None) -> str:
    """350001234.0 → "350,001,234"; 0.12345 → "0.1235"; None → "n/a"."""
    if value is None:
        return "n/a"
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.2f}"
    return f"{value:.4g}"
