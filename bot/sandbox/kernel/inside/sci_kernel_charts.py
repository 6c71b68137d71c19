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

import json
import os
import stat
from typing import Any

from sci_kernel_chart_axes import (
    _OPEN_FLAGS,
    MAX_CATEGORIES,
    SUFFIX,
    VERSION,
    Unknown,
    _quiet,
    _suptitle,
    _text,
    _title,
)
from sci_kernel_chart_kinds import (
    _area_chart,
    _bar_chart,
    _line_chart,
    _segments,
)


def record(figure: Any, fname: Any, fmt: Any = None) -> None:
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


def saved_path(fname: Any, fmt: Any = None) -> str | None:
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
    return str(fname)


def chart_path(image: str) -> str:
    """`<dir>/<stem>.chart.json` for `<dir>/<stem>.<ext>`."""
    return os.path.splitext(image)[0] + SUFFIX


def write_json(path: str, chart: dict[str, Any]) -> bool:
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


def describe_safely(figure: Any, image: str) -> dict[str, Any] | None:
    """describe(), with any error turned into an unknown chart naming it."""
    try:
        return describe(figure, image)
    except Unknown as why:
        return _chart(image, "unknown", note=str(why))
    except Exception as exc:
        return _chart(image, "unknown", note=f"could not read the chart: {type(exc).__name__}")


def describe(figure: Any, image: str) -> dict[str, Any] | None:
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


def _chart(image: str, kind: str, **fields: Any) -> dict[str, Any]:
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


# -- the axes --


def _has_data(ax: Any) -> bool:
    return bool(ax.lines or ax.patches or ax.collections or ax.images or ax.tables)


def _read_axes(ax: Any, texts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
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


def _bar_containers(ax: Any) -> tuple[list[Any], set[Any]]:
    """The axes' BarContainers, and the ids of every artist they own (their bars and
    error bars); other containers (errorbar, stem) make the chart unknown."""
    bars: list[Any] = []
    owned: set[int] = set()
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


def _ids(artists: Any) -> list[Any]:
    """Ids of the artists in a (nested) container."""
    if artists is None:
        return []
    if isinstance(artists, (tuple, list)):
        return [i for item in artists for i in _ids(item)]
    return [id(artists)]


def _in_data_coords(ax: Any, line: Any) -> bool:
    """False for reference lines: axhline/axvline are drawn in blended coordinates."""
    if type(line).__name__ == "_AxLine":
        return False
    return not line.is_transform_set() or line.get_transform() is ax.transData


def _collection_note(collection: Any) -> str:
    name = type(collection).__name__
    return {
        "PathCollection": "scatter",
        "QuadMesh": "heatmap (pcolormesh)",
        "LineCollection": "line segments (vlines, hlines, error bars or contours)",
    }.get(name, f"{name} collection")
