"""The terminal view prints an answer's Markdown tables as aligned columns, and for each
saved chart where its image and its data are, and whether Slack can draw it."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

from bot.run_events import RunFinished
from bot.sessions.events import OutputsReady
from bot.sessions.outputs import OutputFile
from bot.terminal.render import TerminalView
from bot.usage import Usage

ANSWER = """India grew most.

## Growth by country:
| Country | People |
|---|---:|
| **India** | 350,001,234 |
| China | 140,002,000 |

Done."""


def chart_data(series: int) -> bytes:
    return json.dumps(
        {
            "version": 1,
            "image": "figure-1.png",
            "kind": "bar",
            "title": "Growth",
            "categories": ["India", "China"],
            "series": [{"name": f"s{i}", "values": [1, 2]} for i in range(series)],
        }
    ).encode()


def outputs(files: dict[str, bytes]):
    async def stream(data: bytes) -> AsyncIterator[bytes]:
        yield data

    async def listing() -> AsyncIterator[OutputFile]:
        for name, data in files.items():
            yield OutputFile(name, stream(data))

    return listing


async def test_answer_tables_are_printed_aligned_under_their_caption() -> None:
    out = io.StringIO()
    view = TerminalView(out, color=False)
    await view(RunFinished(ANSWER, 1, Usage(), 0.0, "end_turn"))
    printed = out.getvalue()
    assert "| Country |" not in printed and "|---|" not in printed
    assert "India grew most." in printed and "Done." in printed
    lines = printed.splitlines()
    at = lines.index("Growth by country")
    assert lines[at + 1 : at + 5] == [
        "Country       People",
        "-------  -----------",
        "India    350,001,234",
        "China    140,002,000",
    ]


async def test_an_answer_without_tables_is_printed_as_it_was() -> None:
    out = io.StringIO()
    await TerminalView(out, color=False)(RunFinished(" plain | text \n", 1, Usage(), 0.0, "x"))
    assert out.getvalue().startswith("\nplain | text\n")


async def test_the_figures_note_follows_the_cost_line() -> None:
    out = io.StringIO()
    note = "11 of 12 figures traced; not found: 3.2 million"
    await TerminalView(out, color=False)(RunFinished("Done.", 2, Usage(), 0.01, "end_turn",
                                                     figures_note=note))  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines[-2].startswith("2 turns · ") and lines[-1] == note
    out = io.StringIO()
    await TerminalView(out, color=False)(RunFinished("Done.", 2, Usage(), 0.01, "end_turn"))
    assert out.getvalue().splitlines()[-1].startswith("2 turns · ")  # no figures: no line


async def test_saved_charts_say_where_their_data_is_and_whether_slack_can_draw_them(
    tmp_path: Path,
) -> None:
    files = {
        "report.md": b"# Report",
        "figure-1.png": b"\x89PNG fake",
        "figure-1.chart.json": chart_data(2),
        "figure-2.png": b"\x89PNG fake",
        "figure-2.chart.json": chart_data(7),
        "figure-3.png": b"\x89PNG fake",
        "figure-3.chart.json": b'{"version": 1, "image": NaN}',
        "plain.png": b"\x89PNG no data",
    }
    out = io.StringIO()
    await TerminalView(out, color=False, save_to=tmp_path)(OutputsReady(outputs(files)))
    printed = out.getvalue().splitlines()
    charts = [line for line in printed if line.startswith("chart: ")]
    png, data = tmp_path / "figure-1.png", tmp_path / "figure-1.chart.json"
    assert charts[0] == f"chart: {png} (data: {data}, bar, Slack-drawable)"
    assert charts[1].startswith(f"chart: {tmp_path / 'figure-2.png'} (")
    assert "bar, not drawable in Slack: Slack draws at most 6 series" in charts[1]
    assert charts[2].endswith("figure-3.chart.json, unreadable)")
    assert len(charts) == 3  # a PNG without data is only listed as saved
    assert f"Saved {tmp_path / 'plain.png'}" in printed
