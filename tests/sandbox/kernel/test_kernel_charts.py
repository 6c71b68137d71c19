"""The kernel's chart files: beside each matplotlib figure saved to a file, a
`<stem>.chart.json` with what the chart shows, read from real figures drawn by real code in
the local sandbox's kernel; and the writing of that file, which must not follow what the
cell's code planted at its path."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox.base import OUT_DIR, ExecResult, Sandbox, SandboxSpec
from bot.sandbox.local import LocalSandbox
from tests.sandbox.kernel.test_kernel import provider_on
from tests.support import CHECKOUT, matplotlib_in_sandbox

PLT = "import matplotlib.pyplot as plt\nimport numpy as np\n"
KERNEL = CHECKOUT / "bot" / "sandbox" / "kernel" / "inside"


def _charts_module():
    """The kernel's chart module loaded from its file (standard library only at import)."""
    spec = importlib.util.spec_from_file_location(
        "sci_kernel_charts", KERNEL / "sci_kernel_charts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(KERNEL))  # its sibling modules, imported by name as in the sandbox
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(KERNEL))
    return module


sci_kernel_charts = _charts_module()


def pandas_in_sandbox() -> bool:
    found = subprocess.run(["/usr/bin/python3", "-c", "import pandas"], capture_output=True)
    return found.returncode == 0


needs_matplotlib = pytest.mark.skipif(
    not matplotlib_in_sandbox(), reason="matplotlib is not installed for the sandbox's python3"
)
needs_pandas = pytest.mark.skipif(
    not pandas_in_sandbox(), reason="pandas is not installed for the sandbox's python3"
)


@pytest.fixture
async def sandbox(local_sandbox: LocalSandbox) -> AsyncIterator[Sandbox]:
    yield local_sandbox


async def run(sandbox: Sandbox, code: str) -> ExecResult:
    result = await sandbox.run_code("python", PLT + code, 30)
    assert result.status == "ok", (result.stdout.text, result.stderr.text)
    return result


async def read(sandbox: Sandbox, path: str) -> bytes:
    return b"".join([chunk async for chunk in sandbox.download(path)])


async def chart_of(sandbox: Sandbox, code: str, stem: str = "figure-1") -> dict[str, Any]:
    """The chart file of the first figure the code leaves for the kernel to save."""
    await run(sandbox, code)
    return json.loads(await read(sandbox, f"{OUT_DIR}/{stem}.chart.json"))


def data(chart: dict[str, Any]) -> tuple[str, list[str], list[tuple[str, list[Any]]]]:
    series = [(one["name"], one["values"]) for one in chart["series"]]
    return chart["kind"], chart["categories"], series


# -- bars --


@needs_matplotlib
async def test_bars_with_string_categories(sandbox: Sandbox) -> None:
    code = (
        "plt.bar(['north', 'south', 'east'], [3, 4.5, float('nan')], label='sales')\n"
        "plt.title('Sales by region')\nplt.xlabel('region')\nplt.ylabel('units');\n"
    )
    result = await run(sandbox, code)
    assert result.stdout.text == f"[figure saved to {OUT_DIR}/figure-1.png]\n"  # nothing more
    assert result.stderr.text == ""
    chart = json.loads(await read(sandbox, f"{OUT_DIR}/figure-1.chart.json"))
    assert chart == {
        "version": 1,
        "image": "figure-1.png",
        "kind": "bar",
        "title": "Sales by region",
        "x_label": "region",
        "y_label": "units",
        "categories": ["north", "south", "east"],
        "series": [{"name": "sales", "values": [3, 4.5, None]}],
        "segments": [],
        "note": "",
    }


@needs_matplotlib
async def test_grouped_bars_share_the_categories_by_order(sandbox: Sandbox) -> None:
    code = (
        "x = np.arange(3)\n"
        "plt.bar(x - 0.2, [1, 2, 3], 0.4, label='2023')\n"
        "plt.bar(x + 0.2, [4, 5, 6], 0.4)\n"
        "plt.xticks(x, ['a', 'b', 'c'])\n"
    )
    chart = await chart_of(sandbox, code)
    assert data(chart) == ("bar", ["a", "b", "c"], [("2023", [1, 2, 3]), ("Series 2", [4, 5, 6])])


@needs_matplotlib
async def test_stacked_bars_are_unknown(sandbox: Sandbox) -> None:
    code = "plt.bar(['a', 'b'], [1, 2])\nplt.bar(['a', 'b'], [3, 4], bottom=[1, 2])\n"
    chart = await chart_of(sandbox, code)
    assert (chart["kind"], chart["note"], chart["series"]) == ("unknown", "stacked bars", [])


@needs_matplotlib
async def test_horizontal_bars(sandbox: Sandbox) -> None:
    code = "plt.barh(['x', 'y'], [5, 7])\nplt.xlabel('count')\n"
    chart = await chart_of(sandbox, code)
    # one unnamed series is named by the value axis (x, for horizontal bars)
    assert data(chart) == ("barh", ["x", "y"], [("count", [5, 7])])


@needs_matplotlib
async def test_a_histogram_is_bars_of_its_bins(sandbox: Sandbox) -> None:
    code = (
        "plt.hist([1, 2, 2, 3, 5], bins=[0, 2, 4, 6], label='size')\n"
        "plt.figure()\nplt.bar(['a', 'b'], [1, 2], width=1)\n"  # touching, but named
    )
    await run(sandbox, code)
    hist, named = [
        json.loads(await read(sandbox, f"{OUT_DIR}/figure-{n}.chart.json")) for n in (1, 2)
    ]
    assert data(hist) == ("bar", ["0–2", "2–4", "4–6"], [("size", [1, 3, 1])])
    assert data(named) == ("bar", ["a", "b"], [("Series 1", [1, 2])])


# -- lines and areas --


@needs_matplotlib
async def test_a_line_over_years(sandbox: Sandbox) -> None:
    code = "plt.plot([2000, 2010, 2020], [1.5, 2, 3], label='rate')\nplt.axhline(2)\n"
    chart = await chart_of(sandbox, code)
    # the axhline is a reference line, not a series
    assert data(chart) == ("line", ["2000", "2010", "2020"], [("rate", [1.5, 2, 3])])


@needs_matplotlib
async def test_text_ticks_name_the_points_only_when_every_point_has_one(sandbox: Sandbox) -> None:
    code = (
        "plt.plot([0, 1, 2], [5, 6, 7])\nplt.xticks([0, 1, 2], ['lo', 'mid', 'hi'])\n"
        "plt.figure()\nplt.plot([0, 1, 2], [5, 6, 7])\nplt.xticks([0, 2], ['lo', 'hi'])\n"
    )
    await run(sandbox, code)
    named, partly = [
        json.loads(await read(sandbox, f"{OUT_DIR}/figure-{n}.chart.json"))["categories"]
        for n in (1, 2)
    ]
    assert (named, partly) == (["lo", "mid", "hi"], ["0", "1", "2"])


@needs_matplotlib
async def test_lines_with_different_x_get_nulls(sandbox: Sandbox) -> None:
    code = "plt.plot([1, 2, 3], [10, 20, 30], label='a')\nplt.plot([2, 4], [5, 6], label='b')\n"
    chart = await chart_of(sandbox, code)
    assert data(chart) == (
        "line",
        ["1", "2", "3", "4"],
        [("a", [10, 20, 30, None]), ("b", [None, 5, None, 6])],
    )


@needs_matplotlib
async def test_dates_are_iso_dates(sandbox: Sandbox) -> None:
    code = (
        "import datetime as dt\n"
        "plt.plot([dt.date(2024, 1, 1), dt.date(2024, 2, 1)], [1, 2])\n"
        "plt.plot(np.array(['2024-03-01'], dtype='datetime64[D]'), [3], '-')\n"
    )
    chart = await chart_of(sandbox, code)
    assert chart["categories"] == ["2024-01-01", "2024-02-01", "2024-03-01"]


@needs_matplotlib
async def test_fill_between_is_an_area(sandbox: Sandbox) -> None:
    code = (
        "x = [0, 1, 2]\n"
        "plt.plot(x, [1, 3, 2])\n"  # the outline of the area, not a series of its own
        "plt.fill_between(x, [1, 3, 2], alpha=0.3, label='load')\n"
    )
    chart = await chart_of(sandbox, code)
    assert data(chart) == ("area", ["0", "1", "2"], [("load", [1, 3, 2])])


@needs_matplotlib
async def test_stackplot_gives_each_layer_its_own_values(sandbox: Sandbox) -> None:
    code = "plt.stackplot([1, 2, 3], [1, 2, 3], [4, 4, 1], labels=['p', 'q'])\n"
    chart = await chart_of(sandbox, code)
    assert data(chart) == ("area", ["1", "2", "3"], [("p", [1, 2, 3]), ("q", [4, 4, 1])])


# -- pie --


@needs_matplotlib
async def test_a_pie_has_the_values_it_was_given(sandbox: Sandbox) -> None:
    chart = await chart_of(sandbox, "plt.pie([1, 3], labels=['tea', 'coffee'])\n")
    assert chart["kind"] == "pie"
    assert (chart["categories"], chart["series"]) == ([], [])
    assert [(s["label"], s["value"]) for s in chart["segments"]] == [("tea", 1), ("coffee", 3)]
    # not matplotlib's float32, nor shares: the numbers as given
    code = "plt.pie(np.array([1234567.25, 0.5]), labels=['big', 'small'], autopct='%1.0f%%')\n"
    chart = await chart_of(sandbox, code, "figure-2")
    assert [s["value"] for s in chart["segments"]] == [1234567.25, 0.5]
    # on an explicit Axes, and a partial pie (normalize=False) alike
    code = "fig, ax = plt.subplots()\nax.pie([0.2, 0.3], normalize=False)\n"
    chart = await chart_of(sandbox, code, "figure-3")
    assert [s["value"] for s in chart["segments"]] == [0.2, 0.3]
    chart = await chart_of(sandbox, "plt.pie('n', data={'n': [5, 7]})\n", "figure-4")
    assert [s["value"] for s in chart["segments"]] == [5, 7]


@needs_pandas
@needs_matplotlib
async def test_a_pandas_pie_has_the_series_values(sandbox: Sandbox) -> None:
    code = (
        "import pandas as pd\n"
        "pd.Series([120, 30, 50], index=['a', 'b', 'c'], name='n').plot.pie()\n"
    )
    chart = await chart_of(sandbox, code)
    assert [(s["label"], s["value"]) for s in chart["segments"]] == [
        ("a", 120), ("b", 30), ("c", 50)
    ]  # fmt: skip


# -- figures saved without pyplot --


@needs_matplotlib
async def test_a_figure_made_without_pyplot_gets_its_chart_file(sandbox: Sandbox) -> None:
    code = (
        "from matplotlib.figure import Figure\n"
        "fig = Figure()\n"
        "ax = fig.add_subplot()\n"
        "ax.bar(['a', 'b'], [3, 5], label='n')\n"
        "ax.set_title('Counts')\n"
        f"fig.savefig('{OUT_DIR}/made.png')\n"
        "fig2 = Figure()\n"
        "fig2.add_subplot().pie([2, 6], labels=['x', 'y'])\n"
        f"fig2.savefig('{OUT_DIR}/round', format='png')\n"
    )
    result = await sandbox.run_code("python", code, 30)  # no pyplot imported, ever
    assert result.status == "ok", result.stderr.text
    assert result.stdout.text == "" and result.stderr.text == ""
    chart = json.loads(await read(sandbox, f"{OUT_DIR}/made.chart.json"))
    assert (chart["image"], chart["title"]) == ("made.png", "Counts")
    assert data(chart) == ("bar", ["a", "b"], [("n", [3, 5])])
    assert (await read(sandbox, f"{OUT_DIR}/made.png")).startswith(b"\x89PNG")
    chart = json.loads(await read(sandbox, f"{OUT_DIR}/round.chart.json"))
    assert [(s["label"], s["value"]) for s in chart["segments"]] == [("x", 2), ("y", 6)]


@needs_pandas
@needs_matplotlib
async def test_pandas_on_an_explicit_figure_gets_its_chart_file(sandbox: Sandbox) -> None:
    code = (
        "import pandas as pd\n"
        "from matplotlib.figure import Figure\n"
        "fig = Figure()\n"
        "ax = fig.add_subplot()\n"
        "pd.DataFrame({'y': [1, 4, 2]}, index=['p', 'q', 'r']).plot.bar(ax=ax)\n"
        f"fig.savefig('{OUT_DIR}/frame.png')\n"
    )
    result = await sandbox.run_code("python", code, 30)
    assert result.status == "ok", result.stderr.text
    assert result.stdout.text == ""
    chart = json.loads(await read(sandbox, f"{OUT_DIR}/frame.chart.json"))
    assert data(chart) == ("bar", ["p", "q", "r"], [("y", [1, 4, 2])])


# -- unknown --


@pytest.mark.parametrize(
    ("code", "note"),
    [
        ("plt.scatter([1, 2], [3, 4])\n", "scatter"),
        ("plt.plot([1, 2], [3, 4], 'o')\n", "scatter (markers only)"),
        (
            "fig, (a, b) = plt.subplots(2)\na.plot([1, 2])\nb.plot([2, 1])\n",
            "2 axes with data (subplots or twin axes)",
        ),
        ("plt.imshow([[1, 2], [3, 4]])\n", "image (imshow)"),
        ("plt.boxplot([[1, 2, 3, 9]])\n", "vertical segments (boxplot or similar)"),
    ],
    ids=["scatter", "markers", "subplots", "imshow", "boxplot"],
)
@needs_matplotlib
async def test_what_slack_cannot_draw_is_unknown(sandbox: Sandbox, code: str, note: str) -> None:
    chart = await chart_of(sandbox, code)
    assert (chart["kind"], chart["note"]) == ("unknown", note)
    assert (chart["categories"], chart["series"], chart["segments"]) == ([], [], [])


@needs_matplotlib
async def test_an_empty_figure_has_no_chart_file(sandbox: Sandbox) -> None:
    await run(sandbox, "plt.subplots()\n")
    names = sorted(entry.name for entry in await sandbox.list_dir(OUT_DIR))
    assert names == ["figure-1.png"]


@needs_matplotlib
async def test_a_chart_too_big_is_cut(sandbox: Sandbox) -> None:
    code = "for n in range(60):\n    plt.plot(range(1500), [n] * 1500)\n"
    chart = await chart_of(sandbox, code)
    assert chart["kind"] == "line"
    assert chart["note"] == "cut to 50 of 60 series; cut to 1000 of 1500 categories"
    assert len(chart["series"]) == 50 and len(chart["categories"]) == 1000
    assert all(len(one["values"]) == 1000 for one in chart["series"])
    # a line of a million points is read from its left end only
    chart = await chart_of(
        sandbox, "plt.plot(np.arange(10**6)[::-1], np.arange(10**6))\n", "figure-2"
    )
    assert chart["note"] == "cut to 1000 of over 4000 categories"
    assert chart["categories"][:3] == ["0", "1", "2"]
    assert chart["series"][0]["values"][:3] == [999999, 999998, 999997]
    chart = await chart_of(sandbox, "plt.pie([1] * 1200);\n", "figure-3")
    assert (chart["note"], len(chart["segments"])) == ("cut to 1000 of 1200 segments", 1000)


# -- pandas --


@needs_pandas
async def test_pandas_lines_over_a_text_index(sandbox: Sandbox) -> None:
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]}, index=['jan', 'feb', 'mar'])\n"
        "df.plot()\n"
    )
    chart = await chart_of(sandbox, code)
    assert data(chart) == ("line", ["jan", "feb", "mar"], [("a", [1, 2, 3]), ("b", [4, 5, 6])])


@needs_pandas
async def test_pandas_bars(sandbox: Sandbox) -> None:
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame({'a': [1, 2], 'b': [3, 4]}, index=pd.Index(['x', 'y'], name='k'))\n"
        "df.plot.bar(title='by k')\n"
    )
    chart = await chart_of(sandbox, code)
    assert data(chart) == ("bar", ["x", "y"], [("a", [1, 2]), ("b", [3, 4])])
    assert (chart["title"], chart["x_label"]) == ("by k", "k")


@needs_pandas
async def test_pandas_stacked_area_gives_each_column_its_values(sandbox: Sandbox) -> None:
    code = (
        "import pandas as pd\n"
        "index = pd.date_range('2024-01-31', periods=3, freq='M')\n"
        "pd.DataFrame({'a': [1, 2, 3], 'b': [4, 5, 6]}, index=index).plot.area()\n"
    )
    chart = await chart_of(sandbox, code)
    assert data(chart) == (
        "area",
        ["2024-01", "2024-02", "2024-03"],
        [("a", [1, 2, 3]), ("b", [4, 5, 6])],
    )


# -- where the file goes, and what it must not do --


@needs_matplotlib
@pytest.mark.parametrize("backend", ["local", "buddy"])
async def test_savefig_to_a_path_writes_the_chart_beside_it(
    backend: str, sandbox_root: Path
) -> None:
    code = (
        "plt.plot([1, 2], [3, 4])\n"
        f"plt.savefig('{OUT_DIR}/trend.svg')\n"
        "import io\nplt.savefig(io.BytesIO())\n"  # a file-like object: no chart file
        "plt.figure()\nplt.bar(['a'], [1])\n"
        f"plt.savefig('{OUT_DIR}/no-extension')\n"
    )
    async with provider_on(backend, sandbox_root) as provider:
        made = await provider.create(SandboxSpec(session_key="charts"))
        try:
            result = await made.run_code("python", PLT + code, 30)
            assert result.status == "ok", result.stderr.text
            names = sorted(entry.name for entry in await made.list_dir(OUT_DIR))
            trend = json.loads(await read(made, f"{OUT_DIR}/trend.chart.json"))
            bars = json.loads(await read(made, f"{OUT_DIR}/no-extension.chart.json"))
        finally:
            await made.destroy()
    assert names == ["no-extension.chart.json", "no-extension.png", "trend.chart.json", "trend.svg"]
    assert (trend["image"], trend["kind"], trend["categories"]) == ("trend.svg", "line", ["1", "2"])
    assert (bars["image"], bars["kind"]) == ("no-extension.png", "bar")


@needs_matplotlib
async def test_a_symlink_at_the_chart_path_is_not_followed(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        f"os.makedirs('{OUT_DIR}', exist_ok=True)\n"
        "open('/buddy/work/precious.txt', 'w').write('keep me')\n"
        f"os.symlink('/buddy/work/precious.txt', '{OUT_DIR}/figure-1.chart.json')\n"
        "plt.plot([1, 2])\nplt.show()\n"
        "print(open('/buddy/work/precious.txt').read())\n"
        f"print(os.path.islink('{OUT_DIR}/figure-1.chart.json'))\n"
    )
    result = await run(sandbox, code)
    assert result.stdout.text == f"[figure saved to {OUT_DIR}/figure-1.png]\nkeep me\nTrue\n"
    assert result.stderr.text == ""
    assert (await read(sandbox, f"{OUT_DIR}/figure-1.png")).startswith(b"\x89PNG")


@needs_matplotlib
async def test_a_figure_that_cannot_be_read_still_saves(sandbox: Sandbox) -> None:
    code = (
        "from matplotlib.lines import Line2D\n"
        "class Odd(Line2D):\n"
        "    def get_xdata(self, orig=True):\n"
        "        print('read')\n"  # what the reading prints does not reach the cell's output
        "        raise RuntimeError('no data for you')\n"
        "plt.gca().add_line(Odd([0, 1], [0, 1]))\n"
        "print('after')\n"
    )
    result = await run(sandbox, code)
    assert result.stdout.text == f"after\n[figure saved to {OUT_DIR}/figure-1.png]\n"
    assert result.stderr.text == ""
    assert (await read(sandbox, f"{OUT_DIR}/figure-1.png")).startswith(b"\x89PNG")
    chart = json.loads(await read(sandbox, f"{OUT_DIR}/figure-1.chart.json"))
    assert (chart["kind"], chart["note"]) == ("unknown", "could not read the chart: RuntimeError")
    again = await sandbox.run_code("python", "print(1 + 1)", 10)  # the kernel lives on
    assert (again.stdout.text, again.kernel) == ("2\n", "kept")


# -- the file's writing, in this process (standard library only) --


def test_the_chart_file_sits_beside_the_image() -> None:
    assert sci_kernel_charts.chart_path("/o/figure-3.png") == "/o/figure-3.chart.json"
    assert sci_kernel_charts.chart_path("/o/a.b.pdf") == "/o/a.b.chart.json"
    assert sci_kernel_charts.saved_path(Path("/o/x.png")) == "/o/x.png"
    assert sci_kernel_charts.saved_path("/o/x", "png") == "/o/x"  # a given format adds nothing
    assert sci_kernel_charts.saved_path(object()) is None


def test_writing_never_follows_or_blocks_on_what_is_planted(tmp_path: Path) -> None:
    chart = {"version": 1, "kind": "line"}
    target = tmp_path / "target"
    target.write_text("keep")
    (tmp_path / "link.chart.json").symlink_to(target)
    assert not sci_kernel_charts.write_json(str(tmp_path / "link.chart.json"), chart)
    assert target.read_text() == "keep"
    fifo = tmp_path / "fifo.chart.json"
    os.mkfifo(fifo)  # no reader: a blocking open would hang
    assert not sci_kernel_charts.write_json(str(fifo), chart)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader: writes could block
    try:
        assert not sci_kernel_charts.write_json(str(fifo), chart)
        assert os.read(reader, 10) == b""  # nothing was written to it
    finally:
        os.close(reader)
    (tmp_path / "dir.chart.json").mkdir()
    assert not sci_kernel_charts.write_json(str(tmp_path / "dir.chart.json"), chart)
    plain = tmp_path / "plain.chart.json"
    plain.write_text("x" * 1000)  # an older, longer file is replaced whole
    assert sci_kernel_charts.write_json(str(plain), chart)
    assert json.loads(plain.read_text()) == chart
