"""The chart kinds `sci_kernel_charts` reads from one axes: bars (and histograms), lines,
areas and pies, each as the chart file's categories, series or segments."""

from __future__ import annotations

import itertools
import math
from typing import Any

from sci_kernel_chart_axes import (
    _TEXT_FORMATTERS,
    MAX_CATEGORIES,
    MAX_POINTS,
    MAX_SERIES,
    Unknown,
    _finite,
    _json_number,
    _labeller,
    _lines_body,
    _names,
    _number,
    _quiet,
    _text,
)

# -- bars --


def _bar_chart(ax: Any, containers: list[Any], texts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    horizontal = _horizontal(containers[0])
    if any(_horizontal(c) != horizontal for c in containers):
        raise Unknown("bars in both directions")
    axis = ax.yaxis if horizontal else ax.xaxis
    groups = []  # per container: [(start, size, value)] sorted by position
    for container in containers:
        bars = []
        for patch in container.patches:
            if horizontal:
                start, size = patch.get_y(), patch.get_height()
                base, value = patch.get_x(), patch.get_width()
            else:
                start, size = patch.get_x(), patch.get_width()
                base, value = patch.get_y(), patch.get_height()
            if _finite(base) and base != 0:
                raise Unknown("stacked bars")
            bars.append((float(start), float(size), value))
        groups.append(sorted(bars, key=lambda bar: bar[0] + bar[1] / 2))
    label = _labeller(axis, ax)
    if len(groups) == 1 and _touching(groups[0]) and not _named_positions(axis):
        categories = [f"{_number(s, 6)}–{_number(s + w, 6)}" for s, w, _ in groups[0]]
        values = [[v for _, _, v in groups[0]]]
    else:
        categories, values = _align_bars(groups, label)
    value_label = texts["x_label" if horizontal else "y_label"]
    names = _names([_bar_label(c) for c in containers], value_label)
    return ("barh" if horizontal else "bar"), _lines_body(categories, names, values)


def _horizontal(container: Any) -> bool:
    orientation = getattr(container, "orientation", None)
    if orientation is not None:
        return bool(orientation == "horizontal")
    return False


def _bar_label(container: Any) -> str:
    """The container's label; hist() puts its labels on each dataset's first bar."""
    label = str(container.get_label())
    first = container.patches[0].get_label() if container.patches else ""
    if label.startswith("_") and first and not str(first).startswith("_"):
        return str(first)
    return label


def _named_positions(axis: Any) -> bool:
    """Whether the axis names its positions (string categories, set tick labels)."""
    if getattr(getattr(axis, "units", None), "_mapping", None):
        return True
    return type(axis.get_major_formatter()).__name__ in _TEXT_FORMATTERS


def _touching(bars: list[Any]) -> bool:
    """Bars side by side with no gap: a histogram's bins."""
    if len(bars) < 2:
        return False
    for (s1, w1, _), (s2, _w2, _) in zip(bars, bars[1:]):
        if w1 <= 0 or not math.isclose(s1 + w1, s2, rel_tol=1e-9, abs_tol=1e-12):
            return False
    return True


def _align_bars(groups: list[Any], label: Any) -> tuple[list[Any], list[Any]]:
    centers = [[s + w / 2 for s, w, _ in bars] for bars in groups]
    shared = any(
        set(_keys(a)) & set(_keys(b)) for i, a in enumerate(centers) for b in centers[i + 1 :]
    )
    if len(groups) > 1 and not shared and len({len(c) for c in centers}) == 1:
        # grouped bars: the n-th bar of each container belongs to the n-th category
        positions = [sum(col) / len(col) for col in zip(*centers)]
        values = [[v for _, _, v in bars] for bars in groups]
        return label(positions), values
    return _union(
        [(c, [v for _, _, v in bars]) for c, bars in zip(centers, groups)],
        label,
    )


# -- lines and areas --


def _line_chart(ax: Any, lines: list[Any], texts: dict[str, Any]) -> dict[str, Any]:
    lines = [line for line in lines if len(line.get_xdata(orig=False))]
    series, cut = [], False
    for n, line in enumerate(lines):
        if str(line.get_linestyle()).lower() in ("none", "", " "):
            raise Unknown("scatter (markers only)")
        if n >= MAX_SERIES:  # cut: not read
            continue
        x, y, shortened = _xy(line)
        if len(x) > 1 and len(set(x)) == 1 and len(set(y)) > 1:
            raise Unknown("vertical segments (boxplot or similar)")
        series.append((line.get_label(), x, y))
        cut = cut or shortened
    if not series:
        raise Unknown("lines without data")
    categories, values = _union([(x, y) for _, x, y in series], _labeller(ax.xaxis, ax))
    names = _names([line.get_label() for line in lines], texts["y_label"])
    return _lines_body(categories, names, values, more_categories=cut)


def _area_chart(
    ax: Any, areas: list[Any], lines: list[Any], texts: dict[str, Any]
) -> dict[str, Any]:
    layers = []  # (label, x, bottom, top) as given to fill_between
    for collection in areas:
        parts = [_fill_between_part(path) for path in collection.get_paths()]
        if not parts:
            continue
        x = [v for part in parts for v in part[0]]
        dep1 = [v for part in parts for v in part[1]]
        dep2 = [v for part in parts for v in part[2]]
        layers.append((collection.get_label(), x, dep1, dep2))
    series = []
    tops: list[Any] = []
    for label, x, dep1, dep2 in layers:
        if not any(dep2):
            own, top = dep1, dep1
        elif not any(dep1) or any(_same(x, dep1, tx, ty) for tx, ty in tops):
            own, top = [b - a for a, b in zip(dep1, dep2)], dep2
        else:
            raise Unknown("band between two curves")
        tops.append((x, top))
        series.append((label, x, own))
    for line in lines:
        lx, ly, _ = _xy(line)
        if not any(_same(lx, ly, tx, ty) for tx, ty in tops):
            raise Unknown("mixed chart: areas and lines")
    if not series:
        raise Unknown("areas without data")
    categories, values = _union([(x, y) for _, x, y in series], _labeller(ax.xaxis, ax))
    names = _names([name for name, _, _ in series], texts["y_label"])
    return _lines_body(categories, names, values)


def _fill_between_part(path: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """(x, y1, y2) of one polygon made by fill_between: its start, y1 along x, its end, y2
    back along x (and the closing point)."""
    import numpy as np

    points = np.asarray(path.vertices, dtype=float)
    if len(points) > 1 and np.array_equal(points[-1], points[0]):
        points = points[:-1]
    n = (len(points) - 2) // 2
    if n < 1 or len(points) != 2 * n + 2:
        raise Unknown("filled shape that is not fill_between")
    x, y1 = points[1 : n + 1, 0], points[1 : n + 1, 1]
    back_x, y2 = points[n + 2 :, 0][::-1], points[n + 2 :, 1][::-1]
    if not (np.allclose(x, back_x) and points[0, 0] == x[0] and points[n + 1, 0] == x[-1]):
        raise Unknown("filled shape that is not fill_between (fill_betweenx, violin, fill)")
    return x.tolist(), y1.tolist(), y2.tolist()


def _same(x: list[Any], y: list[Any], other_x: list[Any], other_y: list[Any]) -> bool:
    return len(x) == len(other_x) and x == list(other_x) and _close(y, other_y)


def _close(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-12) or (u != u and v != v) for u, v in zip(a, b)
    )


def _xy(line: Any) -> tuple[list[Any], list[Any], bool]:
    """A line's points in axis positions (dates and categories converted), NaN x dropped;
    of a long line only the MAX_POINTS leftmost (True: it was shortened), as only the
    first MAX_CATEGORIES positions are kept anyway."""
    import numpy as np

    x = np.ma.asarray(line.get_xdata(orig=False), dtype=float).filled(np.nan).ravel()
    y = np.ma.asarray(line.get_ydata(orig=False), dtype=float).filled(np.nan).ravel()
    n = min(len(x), len(y))
    keep = np.isfinite(x[:n])
    x, y = x[:n][keep], y[:n][keep]
    if len(x) <= MAX_POINTS:
        return x.tolist(), y.tolist(), False
    leftmost = np.argsort(x, kind="stable")[:MAX_POINTS]
    return x[leftmost].tolist(), y[leftmost].tolist(), True


def _union(series: list[Any], label: Any) -> tuple[list[Any], list[Any]]:
    """Categories: the union of the series' positions, ascending; each series' values at
    them (null where it has none; the first of repeated positions)."""
    positions = sorted({key for xs, _ in series for key in _keys(xs)})
    index = {key: i for i, key in enumerate(positions)}
    values = []
    for xs, ys in series:
        row = [None] * len(positions)
        for key, value in zip(_keys(xs), ys):
            if row[index[key]] is None:
                row[index[key]] = value
        values.append(row)
    # only the kept categories are named; the rest only count (for the note on the cut)
    cut = positions[MAX_CATEGORIES:]
    return label(positions[:MAX_CATEGORIES]) + [""] * len(cut), values


def _keys(xs: list[Any]) -> list[Any]:
    """Positions rounded so that float noise does not split a category."""
    return [round(float(x), 9) for x in xs]


# -- pie --


def keep_pie_values(wedges: Any, x: Any, data: Any = None) -> None:
    """Mark each wedge pie() drew with the value it was given for it (the call's `x`, or
    the column of `data` it names). Never raises (but KeyboardInterrupt): the pie is drawn
    whatever happens here."""
    try:
        with _quiet():
            if isinstance(x, str) and data is not None:
                x = data[x]
            values = list(itertools.islice(iter(x), len(wedges) + 1))
            if len(values) != len(wedges):
                return  # not one value per wedge: the shares will do
            for wedge, value in zip(wedges, values):
                wedge._kernel_value = float(value)
    except Exception:
        pass


def _segments(wedges: list[Any]) -> list[Any]:
    segments = []
    for n, wedge in enumerate(wedges, 1):
        label = _text(wedge.get_label())
        value = getattr(wedge, "_kernel_value", None)
        if not isinstance(value, float):
            value = abs(float(wedge.theta2) - float(wedge.theta1)) / 360 * 100
        name = label if label and not label.startswith("_") else f"Segment {n}"
        segments.append({"label": name, "value": _json_number(value)})
    return segments
