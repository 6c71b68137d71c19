"""Answers with data, end to end on both backends: the answer's table as a data_table block
(numbers as numbers), a plt.bar chart as a data_visualization block beside its PNG, the
report as a canvas (updated in place by a follow-up), a long table cut with its CSV
attached, and the fallbacks of a workspace without the new blocks or without canvases."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.scripts import population_charted
from tests.slack_harness import CHANNEL, Harness, bot_process, fake_world, running_bot
from tests.support import POPULATION_CSV, matplotlib_in_sandbox

CLASSIC = {"slack_ui": "classic"}
QUESTION = "Which three countries grew the most from 2000 to 2020?"
COUNTRIES = ["India", "China", "Nigeria"]

needs_matplotlib = pytest.mark.skipif(
    not matplotlib_in_sandbox(), reason="the sandbox's python3 has no matplotlib"
)


async def ask_population(h: Harness, question: str = QUESTION) -> str:
    csv_file = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
    message = await h.slack.post_user_message(CHANNEL, question, files=[csv_file], mention=True)
    return message["ts"]


def blocks_of(h: Harness, thread: str, kind: str) -> list[dict[str, Any]]:
    return [b for m in h.bot_messages(thread) for b in m.get("blocks") or [] if b["type"] == kind]


def shared(h: Harness, name: str) -> list:
    return [u for u in h.slack.uploads.values() if u.filename == name and u.shared_ts]


async def answered(h: Harness, thread: str, *names: str) -> None:
    """The run's data message is up and its files shared."""
    await h.wait_for_text(thread, "5 turns", 60)
    for name in names:
        await h.slack.wait_for(lambda name=name: shared(h, name), 30)


def expected_growth() -> dict[str, int]:
    values: dict[str, dict[str, int]] = {name: {} for name in COUNTRIES}
    with POPULATION_CSV.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Country Name"] in values and row["Year"] in ("2000", "2020"):
                values[row["Country Name"]][row["Year"]] = int(float(row["Value"]))
    return {name: v["2020"] - v["2000"] for name, v in values.items()}


@needs_matplotlib
@pytest.mark.parametrize("ui", ["agent", "classic"])
async def test_population_answer_shows_a_data_table_a_chart_and_a_canvas(
    backend: str, ui: str, sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(
        backend, population_charted, sandbox_root, monkeypatch, slack_ui=ui
    ) as h:
        thread = await ask_population(h)
        await answered(h, thread, "report.md", "growth.png")
        growth = expected_growth()

        [table] = blocks_of(h, thread, "data_table")
        header, *rows = table["rows"]
        assert [c["text"] for c in header] == ["Country", "2000", "2020", "Increase"]
        assert [r[0]["text"] for r in rows] == COUNTRIES
        for row in rows:
            increase = row[3]
            assert increase["type"] == "raw_number"  # sorts as a number
            assert increase["value"] == growth[row[0]["text"]]
            assert increase["text"] == f"{growth[row[0]['text']]:,}"
        assert table["caption"]

        [chart] = blocks_of(h, thread, "data_visualization")
        assert chart["chart"]["type"] == "bar"
        assert chart["chart"]["axis_config"]["categories"] == COUNTRIES
        [series] = chart["chart"]["series"]
        assert [p["value"] for p in series["data"]] == [growth[c] for c in COUNTRIES]
        assert chart["title"] == "Population increase, 2000 to 2020"
        [png] = shared(h, "growth.png")
        assert "India" in (png.alt_txt or "")  # the PNG says what it shows
        assert not [u for u in h.slack.uploads.values() if u.filename.endswith(".json")
                    and u.filename != "top3.json"]  # fmt: skip

        # The answer itself points at the table instead of holding its pipes.
        answer = "\n".join(b["text"] for b in blocks_of(h, thread, "markdown"))
        assert "| India |" not in answer and "Table 1 below" in answer

        [canvas] = h.slack.canvases.values()
        assert canvas.title == "Largest population growth, 2000 to 2020"
        assert "India" in canvas.markdown
        assert canvas.access == {CHANNEL: "read"}
        [link] = [b for b in blocks_of(h, thread, "rich_text") if "canvas" in str(b)]
        assert link["elements"][0]["elements"][1] == {"type": "canvas", "file_id": canvas.id}
        assert shared(h, "report.md")  # still attached


def rewriting_analyst(req: ModelRequest) -> Reply:
    """Writes report.md with the question in it, then answers."""
    if not req.tool_results():
        question = req.last_user_text[-40:]
        code = f"open('/buddy/work/report.md', 'w').write('# Report\\n\\nAsked: ' + {question!r})"
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    return Reply([text("Written.")])


async def test_a_follow_up_that_rewrites_the_report_updates_the_same_canvas(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(backend, rewriting_analyst, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "first report", mention=True))["ts"]
        await h.slack.wait_for(lambda: h.slack.canvases, 30)
        [canvas] = h.slack.canvases.values()
        assert "first report" in canvas.markdown
        await h.slack.post_user_message(CHANNEL, "second report", thread_ts=thread)
        await h.slack.wait_for(lambda: "second report" in canvas.markdown, 30)
        assert len(h.slack.canvases) == 1 and canvas.edits == 1
        await h.slack.wait_for(lambda: len(shared(h, "report.md")) == 2, 30)


async def test_after_a_restart_the_follow_up_updates_the_same_canvas(
    sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world("local", rewriting_analyst, sandbox_root, monkeypatch) as h:
        async with bot_process(h):
            message = await h.slack.post_user_message(CHANNEL, "first report", mention=True)
            await h.slack.wait_for(lambda: shared(h, "report.md"), 30)
        async with bot_process(h):  # a new process: the canvas id comes from the store
            await h.slack.post_user_message(CHANNEL, "second report", thread_ts=message["ts"])
            await h.slack.wait_for(lambda: len(shared(h, "report.md")) == 2, 30)
        [canvas] = h.slack.canvases.values()
        assert "second report" in canvas.markdown and canvas.edits == 1


async def test_a_canvas_someone_deleted_is_made_again(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot("local", rewriting_analyst, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "first report", mention=True))["ts"]
        await h.slack.wait_for(lambda: shared(h, "report.md"), 30)
        [first] = h.slack.canvases
        client = AsyncWebClient(base_url=h.slack.api_url, token=h.slack.bot_token)
        assert (await client.canvases_delete(canvas_id=first))["ok"]
        await h.slack.post_user_message(CHANNEL, "second report", thread_ts=thread)
        await h.slack.wait_for(lambda: len(shared(h, "report.md")) == 2, 30)
        [second] = [c for c in h.slack.canvases.values() if c.id != first]
        assert "second report" in second.markdown and second.access == {CHANNEL: "read"}
        links = [b for b in blocks_of(h, thread, "rich_text") if second.id in str(b)]
        assert links


def long_table(req: ModelRequest) -> Reply:
    rows = "\n".join(f"| row {i} | {i * 1.5:,.1f} |" for i in range(300))
    return Reply([text(f"Every row:\n\n| Name | Value |\n|---|---:|\n{rows}\n")])


async def test_a_table_of_300_rows_is_cut_and_attached_whole_as_csv(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(backend, long_table, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "all rows", mention=True))["ts"]
        await h.slack.wait_for(lambda: blocks_of(h, thread, "data_table"), 30)
        [table] = blocks_of(h, thread, "data_table")
        assert 2 <= len(table["rows"]) <= 101
        assert "of 300 rows" in h.texts(thread)
        await h.slack.wait_for(lambda: [u for u in h.slack.uploads.values()
                                        if u.filename.endswith(".csv")], 30)  # fmt: skip
        [upload] = [u for u in h.slack.uploads.values() if u.filename.endswith(".csv")]
        rows = list(csv.reader(io.StringIO(upload.content.decode())))
        assert len(rows) == 301 and rows[-1] == ["row 299", "448.5"]


def small_table(req: ModelRequest) -> Reply:
    return Reply(
        [text("Totals:\n\n| Region | Total |\n|---|---:|\n| North | 1,204 |\n| South | 980 |")]
    )


@pytest.mark.parametrize(
    ("refused", "kind"),
    [({"data_table"}, "table"), ({"data_table", "table"}, "rich_text")],
)
async def test_a_workspace_without_the_new_blocks_gets_the_fallbacks_once_learnt(
    refused: set[str], kind: str, sandbox_root: Path, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.slack.view.surfaces")
    options = {"refuse_blocks": refused}
    async with running_bot("local", small_table, sandbox_root, monkeypatch, options) as h:
        for question in ("one", "two"):
            thread = (await h.slack.post_user_message(CHANNEL, question, mention=True))["ts"]
            await h.slack.wait_for(lambda thread=thread: blocks_of(h, thread, kind), 30)
            assert "North" in str(blocks_of(h, thread, kind))
        refusals = [c for c in h.slack.calls_to("chat.postMessage")
                    if c.error == "invalid_blocks"]  # fmt: skip
        assert len(refusals) == len(refused)  # learnt at the first answer, not again
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == len(refused)


@needs_matplotlib
async def test_a_workspace_without_charts_gets_the_png_alone(
    sandbox_root: Path, monkeypatch
) -> None:
    options = {"refuse_blocks": {"data_visualization"}}
    async with running_bot("local", population_charted, sandbox_root, monkeypatch, options) as h:
        thread = await ask_population(h)
        await answered(h, thread, "report.md", "growth.png")
        await h.slack.wait_for(lambda: blocks_of(h, thread, "data_table"), 30)
        assert not blocks_of(h, thread, "data_visualization")


@pytest.mark.parametrize("canvases", ["free", "disabled"])
async def test_a_workspace_without_canvases_gets_the_report_file_alone(
    canvases: str, sandbox_root: Path, monkeypatch, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.slack.view.canvas")
    options = {"canvases": canvases}
    async with running_bot("local", rewriting_analyst, sandbox_root, monkeypatch, options) as h:
        for question in ("first report", "second report"):
            thread = (await h.slack.post_user_message(CHANNEL, question, mention=True))["ts"]
            await h.slack.wait_for(lambda thread=thread: shared(h, "report.md"), 30)
            await h.wait_for_text(thread, "Written.")
        assert not h.slack.canvases
        assert not blocks_of(h, thread, "rich_text")
    [said] = [r for r in caplog.records if "no canvases" in r.getMessage()]
    assert h.slack.team_id in said.getMessage()


async def test_a_workspace_without_the_canvas_scope_gets_the_file_alone(
    sandbox_root: Path, monkeypatch
) -> None:
    from tests.fakes.slack import DEFAULT_SCOPES

    options = {"scopes": [s for s in DEFAULT_SCOPES if not s.startswith("canvases:")]}
    async with running_bot("local", rewriting_analyst, sandbox_root, monkeypatch, options) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "a report", mention=True))["ts"]
        await h.slack.wait_for(lambda: shared(h, "report.md"), 30)
        await h.wait_for_text(thread, "Written.")
        assert not h.slack.canvases


HOSTILE = """
import json, os
os.makedirs('/buddy/work/out', exist_ok=True)
png = b'\\x89PNG\\r\\n\\x1a\\n' + b'0' * 64
for stem in ('huge', 'wrong', 'mention', 'orphan'):
    if stem != 'orphan':
        open(f'/buddy/work/out/{stem}.png', 'wb').write(png)
open('/buddy/work/out/huge.chart.json', 'w').write('{"version": 1, "x": "' + 'a' * 700000 + '"}')
open('/buddy/work/out/wrong.chart.json', 'w').write(json.dumps({"version": 1, "kind": "bar",
    "image": "wrong.png", "categories": ["a"], "series": [{"name": 1, "values": "x"}]}))
open('/buddy/work/out/mention.chart.json', 'w').write(json.dumps({"version": 1, "kind": "bar",
    "image": "mention.png", "title": "<!channel> look", "x_label": "", "y_label": "",
    "categories": ["a", "b"], "series": [{"name": "<!here>", "values": [1, 2]}],
    "segments": [], "note": ""}))
open('/buddy/work/out/orphan.chart.json', 'w').write('{}')
print('planted')
"""


def planter(req: ModelRequest) -> Reply:
    if not req.tool_results():
        return Reply([tool_use("run_code", {"language": "python", "code": HOSTILE})])
    return Reply([text("Done planting.")])


async def test_chart_records_written_to_break_the_bot_leave_the_images_alone(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", planter, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "plant", mention=True))["ts"]
        await h.wait_for_text(thread, "Done planting.")
        await h.slack.wait_for(
            lambda: len([u for u in h.slack.uploads.values() if u.shared_ts]) == 3, 30
        )
        names = sorted(u.filename for u in h.slack.uploads.values())
        assert names == ["huge.png", "mention.png", "wrong.png"]  # no record is attached
        [chart] = blocks_of(h, thread, "data_visualization")  # the one well-formed record
        assert "<!channel>" not in str(chart) and "<!here>" not in str(chart)
        assert ":warning:" not in h.texts(thread)


def mention_table(req: ModelRequest) -> Reply:
    """100 rows of 10 `<!x>` cells: 4,000 characters as written, 10,000+ once escaped."""
    rows = "\n".join("| " + " | ".join(["<!x>"] * 10) + " |" for _ in range(100))
    header = "| " + " | ".join(f"c{i}" for i in range(10)) + " |"
    return Reply([text(f"Marks:\n\n{header}\n|{'---|' * 10}\n{rows}\n")])


async def test_cells_that_grow_when_escaped_still_make_a_data_table(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", mention_table, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "marks", mention=True))["ts"]
        await h.slack.wait_for(lambda: "of 100 rows" in h.texts(thread), 30)
        [table] = blocks_of(h, thread, "data_table")
        assert table["rows"][1][0]["text"] == "&lt;!x&gt;"
        assert not [c for c in h.slack.calls_to("chat.postMessage") if c.error]


async def test_a_workspace_refusing_every_block_still_gets_the_table_as_text(
    sandbox_root: Path, monkeypatch
) -> None:
    """The monospace fallback (a rich_text block) refused too: the data goes as plain text."""
    options = {"refuse_blocks": {"data_table", "table", "rich_text"}}
    async with running_bot("local", small_table, sandbox_root, monkeypatch, options) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "totals", mention=True))["ts"]
        await h.slack.wait_for(lambda: "South" in h.texts(thread), 30)
        [data] = [m for m in h.bot_messages(thread) if "North" in (m.get("text") or "")]
        assert not data.get("blocks") and "1,204" in data["text"]


def disguised_link(req: ModelRequest) -> Reply:
    cell = "<@U0BOSS> <https://evil.example|Open full report>"
    return Reply([text(f"Links:\n\n| Who | Where |\n|---|---|\n| {cell} | x |\n| b | y |")])


async def test_table_text_in_the_notification_is_not_read_as_mrkdwn(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", disguised_link, sandbox_root, monkeypatch) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "links", mention=True))["ts"]
        await h.slack.wait_for(lambda: blocks_of(h, thread, "data_table"), 30)
        [data] = [m for m in h.bot_messages(thread)
                  if any(b["type"] == "data_table" for b in m.get("blocks") or [])]  # fmt: skip
        assert "U0BOSS" in data["text"] and "evil.example" in data["text"]
        assert "<@" not in data["text"] and "<https://" not in data["text"]
        assert "&lt;@U0BOSS&gt;" in data["text"]
