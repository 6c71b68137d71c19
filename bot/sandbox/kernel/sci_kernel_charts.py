"""What a saved matplotlib chart shows, as data: beside each figure saved to a file
`<dir>/<stem>.<ext>`, the kernel writes `<dir>/<stem>.chart.json`, which the bot reads to
draw the chart natively in Slack. Copied into the sandbox with `sci_kernel`; standard
library at import time, matplotlib and numpy only once the cell's code has imported them
(pandas is never imported: its objects are told by their attributes).

The file (version 1):
  {"version": 1, "image": BASENAME, "kind": "line"|"bar"|"barh"|"area"|"pie"|"unknown",
   "title": STR, "x_label": STR, "y_label": STR,
   "categories": [STR, ...], "series": [{"name": STR, "values": [NUMBER|null, ...]}],
   "segments": [{"label": STR, "value": NUMBER}], "note": STR}

How a figure is read (one axes with data; several, e.g. subplots or twinx, are unknown):
- bar/barh: one series per BarContainer; categories are the string categories or the
  text tick labels at the bars (pandas, set_xticks with labels), else the bar positions;
  grouped bars (several containers side by side) share categories by order; stacked bars
  (a non-zero bottom) are unknown. Bars that touch each other on a numeric axis are a
  histogram: categories are the bins ("0–10"). Error bars drawn with bars are left out.
- line: one series per Line2D; categories are the union of the x values, ascending (dates
  as ISO dates, "2020-01-31", with the time only when it is not midnight; pandas periods
  as pandas writes them, "2020-01"; text tick labels when there is one at every point,
  as pandas sets for a text index); a series has null where it has no point. Lines not
  drawn in data coordinates (axhline, axvline, axline) are reference lines and left out
  whatever their label; lines of markers only are a scatter (unknown); vertical segments
  (boxplot whiskers) are unknown.
- area: fill_between, stackplot, pandas .plot.area(): each polygon's own values, its top
  minus its bottom (a stacked layer's bottom is the layer below); a band between two
  curves that is not a stack is unknown. Lines tracing an area's top are its outline.
- pie: one segment per wedge, labelled by the wedge's label (else "Segment N"); the value
  is the one pie() was given for it (matplotlib keeps only the angles: the kernel's wrapper
  of Axes.pie marks each wedge with its value), else the wedge's share of the circle in
  percent.
- anything else (scatter, images, meshes, error bars, 3-D, polar, ...) is unknown with a
  short note; so is a figure whose reading raised (the note names the exception).
A series is named by its label unless that starts with "_" (matplotlib's unnamed), else
by the value axis' label when it is the only series, else "Series N". NaN and infinities
are null. At most MAX_SERIES series and MAX_CATEGORIES categories (or segments) are kept
("note" says so), and every string is cut to MAX_TEXT characters, so a hostile figure cannot write
megabytes.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import os
import stat
import warnings

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


def record(figure, fname, fmt=None) -> None:
    """Write the chart file of `figure`, just saved by savefig(fname, format=fmt), beside
    the saved file. Never raises (but KeyboardInterrupt) and prints nothing."""
    try:
        image = saved_path(fname, fmt)
        if image is None:
            return
        with _quiet():
            chart = describe_safely(figure, os.path.basename(image))
            if chart is not None:
                write_json(chart_path(image), chart)
    except Exception:
        pass


def saved_path(fname, fmt=None) -> str | None:
    """The file savefig wrote for `fname` (None for a file-like object): matplotlib adds
    the default format's extension when neither the name nor `format` gives one."""
    if isinstance(fname, bytes):
        fname = os.fsdecode(fname)
    elif hasattr(fname, "__fspath__"):
        fname = os.fsdecode(os.fspath(fname))
    if not isinstance(fname, str):
        return None
    if fmt is None and not os.path.splitext(fname)[1]:
        import matplotlib

        fname = fname.rstrip(".") + "." + str(matplotlib.rcParams["savefig.format"])
    return fname


def chart_path(image: str) -> str:
    """`<dir>/<stem>.chart.json` for `<dir>/<stem>.<ext>`."""
    return os.path.splitext(image)[0] + SUFFIX


def write_json(path: str, chart: dict) -> bool:
    """Write `chart` to `path` without following a symlink there; False if it could not."""
    data = json.dumps(chart, ensure_ascii=False, allow_nan=False).encode("utf-8", "replace")
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o644)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def describe_safely(figure, image: str) -> dict | None:
    """describe(), with any error turned into an unknown chart naming it."""
    try:
        return describe(figure, image)
    except Unknown as why:
        return _chart(image, "unknown", note=str(why))
    except Exception as exc:
        return _chart(image, "unknown", note=f"could not read the chart: {type(exc).__name__}")


def describe(figure, image: str) -> dict | None:
    """The chart file's content for `figure` saved as `image`; None when no axes has
    data. Raises Unknown (or any error) for what cannot be read."""
    axes = [ax for ax in figure.get_axes() if _has_data(ax)]
    if not axes:
        return None
    ax = axes[0]
    texts = {
        "title": _title(ax) or _suptitle(figure),
        "x_label": _text(ax.get_xlabel()),
        "y_label": _text(ax.get_ylabel()),
    }
    if len(axes) > 1:
        note = f"{len(axes)} axes with data (subplots or twin axes)"
        return _chart(image, "unknown", note=note, **texts)
    try:
        kind, body = _read_axes(ax, texts)
    except Unknown as why:
        return _chart(image, "unknown", note=str(why), **texts)
    return _chart(image, kind, **texts, **body)


def _chart(image: str, kind: str, **fields) -> dict:
    chart = {
        "version": VERSION,
        "image": _text(image),
        "kind": kind,
        "title": "",
        "x_label": "",
        "y_label": "",
        "categories": [],
        "series": [],
        "segments": [],
        "note": "",
    }
    chart.update(fields)
    return chart


@contextlib.contextmanager
def _quiet():
    """Nothing the reading does reaches the cell's output (the model reads it)."""
    sink = io.StringIO()
    with contextlib.ExitStack() as stack:  # not one parenthesised `with`: Python 3.8
        stack.enter_context(contextlib.redirect_stdout(sink))
        stack.enter_context(contextlib.redirect_stderr(sink))
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        yield


# -- the axes --


def _has_data(ax) -> bool:
    return bool(ax.lines or ax.patches or ax.collections or ax.images or ax.tables)


def _read_axes(ax, texts: dict) -> tuple[str, dict]:
    if getattr(ax, "name", "rectilinear") != "rectilinear":
        raise Unknown(f"{ax.name} axes")
    if ax.images:
        raise Unknown("image (imshow)")
    if ax.tables:
        raise Unknown("table")
    bars, owned = _bar_containers(ax)
    patches = [p for p in ax.patches if id(p) not in owned]
    collections = [c for c in ax.collections if id(c) not in owned]
    lines = [line for line in ax.lines if id(line) not in owned and _in_data_coords(ax, line)]
    wedges = [p for p in patches if type(p).__name__ == "Wedge"]
    if len(wedges) < len(patches):
        other = next(p for p in patches if type(p).__name__ != "Wedge")
        raise Unknown(f"{type(other).__name__} shapes")
    areas = [c for c in collections if type(c).__name__ == "PolyCollection"]
    if len(areas) < len(collections):
        other = next(c for c in collections if type(c).__name__ != "PolyCollection")
        raise Unknown(_collection_note(other))
    present = [name for name, items in (("bars", bars), ("pie", wedges), ("areas", areas)) if items]
    if len(present) > 1 or (present and present != ["areas"] and lines):
        raise Unknown("mixed chart: " + " and ".join(present + (["lines"] if lines else [])))
    if bars:
        return _bar_chart(ax, bars, texts)
    if wedges:
        note = (
            f"cut to {MAX_CATEGORIES} of {len(wedges)} segments"
            if len(wedges) > MAX_CATEGORIES
            else ""
        )
        return "pie", {"segments": _segments(wedges[:MAX_CATEGORIES]), "note": note}
    if areas:
        return "area", _area_chart(ax, areas, lines, texts)
    if lines:
        return "line", _line_chart(ax, lines, texts)
    raise Unknown("no data matplotlib draws as a chart")


def _bar_containers(ax) -> tuple[list, set]:
    """The axes' BarContainers, and the ids of every artist they own (their bars and
    error bars); other containers (errorbar, stem) make the chart unknown."""
    bars, owned = [], set()
    for container in ax.containers:
        if type(container).__name__ == "BarContainer":
            bars.append(container)
            owned.update(id(patch) for patch in container.patches)
            owned.update(_ids(getattr(container, "errorbar", None)))
    for container in ax.containers:
        if type(container).__name__ != "BarContainer" and not set(_ids(container)) <= owned:
            name = type(container).__name__.replace("Container", "").lower() or "container"
            raise Unknown(f"{name} plot")
    return bars, owned


def _ids(artists) -> list:
    """Ids of the artists in a (nested) container."""
    if artists is None:
        return []
    if isinstance(artists, (tuple, list)):
        return [i for item in artists for i in _ids(item)]
    return [id(artists)]


def _in_data_coords(ax, line) -> bool:
    """False for reference lines: axhline/axvline are drawn in blended coordinates."""
    if type(line).__name__ == "_AxLine":
        return False
    return not line.is_transform_set() or line.get_transform() is ax.transData


def _collection_note(collection) -> str:
    name = type(collection).__name__
    return {
        "PathCollection": "scatter",
        "QuadMesh": "heatmap (pcolormesh)",
        "LineCollection": "line segments (vlines, hlines, error bars or contours)",
    }.get(name, f"{name} collection")


# -- bars --


def _bar_chart(ax, containers: list, texts: dict) -> tuple[str, dict]:
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


def _horizontal(container) -> bool:
    orientation = getattr(container, "orientation", None)
    if orientation is not None:
        return orientation == "horizontal"
    return False


def _bar_label(container) -> str:
    """The container's label; hist() puts its labels on each dataset's first bar."""
    label = str(container.get_label())
    first = container.patches[0].get_label() if container.patches else ""
    if label.startswith("_") and first and not str(first).startswith("_"):
        return str(first)
    return label


def _named_positions(axis) -> bool:
    """Whether the axis names its positions (string categories, set tick labels)."""
    if getattr(getattr(axis, "units", None), "_mapping", None):
        return True
    return type(axis.get_major_formatter()).__name__ in _TEXT_FORMATTERS


def _touching(bars: list) -> bool:
    """Bars side by side with no gap: a histogram's bins."""
    if len(bars) < 2:
        return False
    for (s1, w1, _), (s2, _w2, _) in zip(bars, bars[1:]):
        if w1 <= 0 or not math.isclose(s1 + w1, s2, rel_tol=1e-9, abs_tol=1e-12):
            return False
    return True


def _align_bars(groups: list, label) -> tuple[list, list]:
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


def _line_chart(ax, lines: list, texts: dict) -> dict:
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


def _area_chart(ax, areas: list, lines: list, texts: dict) -> dict:
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
    tops = []
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


def _fill_between_part(path) -> tuple[list, list, list]:
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


def _same(x: list, y: list, other_x: list, other_y: list) -> bool:
    return len(x) == len(other_x) and x == list(other_x) and _close(y, other_y)


def _close(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-12) or (u != u and v != v) for u, v in zip(a, b)
    )


def _xy(line) -> tuple[list, list, bool]:
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


def _union(series: list, label) -> tuple[list, list]:
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


def _keys(xs: list) -> list:
    """Positions rounded so that float noise does not split a category."""
    return [round(float(x), 9) for x in xs]


# -- pie --


def keep_pie_values(wedges, x, data=None) -> None:
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


def _segments(wedges: list) -> list:
    segments = []
    for n, wedge in enumerate(wedges, 1):
        label = _text(wedge.get_label())
        value = getattr(wedge, "_kernel_value", None)
        if not isinstance(value, float):
            value = abs(float(wedge.theta2) - float(wedge.theta1)) / 360 * 100
        name = label if label and not label.startswith("_") else f"Segment {n}"
        segments.append({"label": name, "value": _json_number(value)})
    return segments


# -- categories, names, numbers --


def _labeller(axis, ax):
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

    def labels(positions: list) -> list:
        keys = [round(p, 9) for p in positions]
        texts = ticks if all(k in ticks or k in originals for k in keys) else {}
        return [
            originals.get(k) or (dated and _date_text(p)) or texts.get(k) or _number(p)
            for k, p in zip(keys, positions)
        ]

    return labels


def _date_axis(axis) -> bool:
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


def _iso(moment) -> str:
    moment = moment.replace(tzinfo=None) if getattr(moment, "tzinfo", None) else moment
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return moment.date().isoformat()
    return moment.isoformat(timespec="seconds")


def _original_labels(axis, ax) -> dict:
    """Positions of lines whose original x values are objects matplotlib converted (pandas
    Periods, Timestamps): their text."""
    labels: dict = {}
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


def _object_text(value) -> str:
    if hasattr(value, "to_timestamp") and hasattr(value, "freqstr"):  # a pandas Period
        return _text(str(value))
    if hasattr(value, "hour"):
        return _iso(value)
    return _text(str(value))


def _text_ticks(axis) -> dict:
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


def _names(labels: list, fallback: str) -> list:
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


def _lines_body(categories: list, names: list, values: list, more_categories=False) -> dict:
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


def _finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _json_number(value):
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


def _text(value) -> str:
    text = value if isinstance(value, str) else str(value)
    return text[:MAX_TEXT]


def _title(ax) -> str:
    for where in ("center", "left", "right"):
        title = _text(ax.get_title(where))
        if title:
            return title
    return ""


def _suptitle(figure) -> str:
    suptitle = getattr(figure, "_suptitle", None)
    return _text(suptitle.get_text()) if suptitle is not None else ""
