"""The words and numbers of a chart read by `sci_kernel_charts`: the categories on an
axis (dates, periods, text ticks), the series' names, and JSON-safe numbers and texts.
The common limits and `Unknown` live here, below the chart kinds that use them."""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import warnings
from typing import Any

VERSION = 1
MAX_SERIES = 50
MAX_CATEGORIES = 1000
MAX_TEXT = 300
# Formatters whose labels are text, not the positions' numbers (set_xticklabels, pandas)
_TEXT_FORMATTERS = ("FixedFormatter", "FuncFormatter", "StrCategoryFormatter")
MAX_POINTS = 4 * MAX_CATEGORIES  # read of one line (a hostile one may have millions)
SUFFIX = ".chart.json"
_OPEN_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_TRUNC
    | os.O_NOFOLLOW  # the cell may have planted a symlink at the JSON's path
    | os.O_NONBLOCK  # ... or a FIFO, which would block a write-only open forever
    | getattr(os, "O_CLOEXEC", 0)
)


class Unknown(Exception):
    """The figure is not a chart Slack can draw; the message says why."""


@contextlib.contextmanager
def _quiet() -> Any:
    """Nothing the reading does reaches the cell's output (the model reads it)."""
    sink = io.StringIO()
    with contextlib.ExitStack() as stack:  # not one parenthesised `with`: Python 3.8
        stack.enter_context(contextlib.redirect_stdout(sink))
        stack.enter_context(contextlib.redirect_stderr(sink))
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        yield


def _labeller(axis: Any, ax: Any) -> Any:
    """positions -> their category texts on `axis`: string categories, dates, pandas'
    periods, or text tick labels when there is one at every position (pandas' 0..n-1 with
    the index as labels, set_xticks with labels), else the numbers."""
    mapping = getattr(getattr(axis, "units", None), "_mapping", None)
    if mapping:
        names = {round(float(v), 9): _text(k) for k, v in mapping.items()}
        return lambda positions: [names.get(round(p, 9)) or _number(p) for p in positions]
    originals = _original_labels(axis, ax)
    dated = _date_axis(axis)
    ticks = _text_ticks(axis)

    def labels(positions: list[Any]) -> list[Any]:
        keys = [round(p, 9) for p in positions]
        texts = ticks if all(k in ticks or k in originals for k in keys) else {}
        return [
            originals.get(k) or (dated and _date_text(p)) or texts.get(k) or _number(p)
            for k, p in zip(keys, positions)
        ]

    return labels


def _date_axis(axis: Any) -> bool:
    converter = getattr(axis, "converter", None)
    names = [cls.__name__ for cls in type(converter).__mro__] if converter else []
    if "PeriodConverter" in names:  # pandas: periods' ordinals, not matplotlib dates
        return False
    if "DateConverter" in names or "_SwitchableDateConverter" in names:
        return True
    formatter = type(axis.get_major_formatter())
    return formatter.__module__ == "matplotlib.dates"


def _date_text(p: float) -> str:
    from matplotlib import dates

    return _iso(dates.num2date(p))


def _iso(moment: Any) -> str:
    moment = moment.replace(tzinfo=None) if getattr(moment, "tzinfo", None) else moment
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return str(moment.date().isoformat())
    return str(moment.isoformat(timespec="seconds"))


def _original_labels(axis: Any, ax: Any) -> dict[float, str]:
    """Positions of lines whose original x values are objects matplotlib converted (pandas
    Periods, Timestamps): their text."""
    labels: dict[float, str] = {}
    if axis is not ax.xaxis:
        return labels
    for line in ax.lines[:MAX_SERIES]:
        raw = line.get_xdata(orig=True)
        if len(raw) == 0 or isinstance(raw[0], (int, float, str)) or not hasattr(raw[0], "year"):
            continue
        positions = line.get_xdata(orig=False)
        for position, value in itertools.islice(zip(positions, raw), MAX_POINTS):
            with contextlib.suppress(Exception):
                labels.setdefault(round(float(position), 9), _object_text(value))
    return labels


def _object_text(value: Any) -> str:
    if hasattr(value, "to_timestamp") and hasattr(value, "freqstr"):  # a pandas Period
        return _text(str(value))
    if hasattr(value, "hour"):
        return _iso(value)
    return _text(str(value))


def _text_ticks(axis: Any) -> dict[float, str]:
    """Tick labels that are text (set_xticklabels, pandas), by integral position."""
    formatter = axis.get_major_formatter()
    if type(formatter).__name__ not in _TEXT_FORMATTERS:
        return {}
    locs = [float(v) for v in axis.get_major_locator()()][:MAX_POINTS]
    try:
        shown = formatter.format_ticks(locs)
    except Exception:
        return {}
    return {round(loc, 9): _text(text) for loc, text in zip(locs, shown) if text}


def _names(labels: list[Any], fallback: str) -> list[Any]:
    unnamed = [not label or str(label).startswith("_") for label in labels]
    names = []
    for n, (label, nameless) in enumerate(zip(labels, unnamed), 1):
        if not nameless:
            names.append(_text(label))
        elif fallback and sum(unnamed) == 1 and len(labels) == 1:
            names.append(fallback)
        else:
            names.append(f"Series {n}")
    return names


def _lines_body(
    categories: list[Any], names: list[Any], values: list[Any], more_categories: Any = False
) -> dict[str, Any]:
    """`names` may outnumber `values` (series cut before they were read); with
    `more_categories`, some series were shortened before their positions were counted."""
    notes = []
    if len(names) > MAX_SERIES:
        notes.append(f"cut to {MAX_SERIES} of {len(names)} series")
    if len(categories) > MAX_CATEGORIES or more_categories:
        total = f"over {len(categories)}" if more_categories else str(len(categories))
        notes.append(f"cut to {MAX_CATEGORIES} of {total} categories")
    series = [
        {"name": name, "values": [_json_number(v) for v in row[:MAX_CATEGORIES]]}
        for name, row in list(zip(names, values))[:MAX_SERIES]
    ]
    return {
        "categories": [_text(c) for c in categories[:MAX_CATEGORIES]],
        "series": series,
        "note": "; ".join(notes),
    }


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _json_number(value: Any) -> Any:
    """A finite number as an int when integral, else a float; anything else null."""
    if not _finite(value):
        return None
    number = float(value)
    if number.is_integer() and abs(number) < 2**53:
        return int(number)
    return number


def _number(value: float, digits: int = 10) -> str:
    """Compact: 2000, not 2000.0; 0.3, not 0.30000000000000004."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return format(value, f".{digits}g")


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    return text[:MAX_TEXT]


def _title(ax: Any) -> str:
    for where in ("center", "left", "right"):
        title = _text(ax.get_title(where))
        if title:
            return title
    return ""


def _suptitle(figure: Any) -> str:
    suptitle = getattr(figure, "_suptitle", None)
    return _text(suptitle.get_text()) if suptitle is not None else ""
