"""The Slack blocks for tables and charts: within data_table, table and monospace limits
(revision A: 101 rows with the header, 20 columns, 10,000 characters), numbers as
raw_number only in data_table, the note when rows are cut, and every data_visualization
rule (6 series, 20 categories, 20-character names, full coverage, positive slices)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.results.chart_blocks import chart_block
from bot.results.charts import Chart, Segment, Series
from bot.results.tables import Table
from bot.slack.render import data_blocks, wording
from bot.slack.render.data_blocks import TABLE_KINDS, table_blocks

# --- the limits, as the contract states them --------------------------------------------


def cell_text(cell: dict[str, Any]) -> str:
    return cell["text"]


def check_data_table(block: dict[str, Any]) -> None:
    assert block["type"] == "data_table"
    assert isinstance(block["caption"], str) and block["caption"].strip()
    rows = block["rows"]
    assert 2 <= len(rows) <= 101
    width = len(rows[0])
    assert 1 <= width <= 20 and all(len(row) == width for row in rows)
    assert all(cell["type"] in {"raw_text", "raw_number"} for cell in rows[0])  # no rich_text
    for row in rows:
        for cell in row:
            assert cell["type"] in {"raw_text", "raw_number", "rich_text"}
            assert isinstance(cell["text"], str) and len(cell["text"]) >= 1
            if cell["type"] == "raw_number":
                value = cell["value"]
                assert type(value) in (int, float) and math.isfinite(value)
    assert type(block["page_size"]) is int and 1 <= block["page_size"] <= 100
    assert 0 <= block["row_header_column_index"] < width
    assert sum(len(cell_text(c)) for row in rows for c in row) <= 10_000


def check_table(block: dict[str, Any]) -> None:
    assert block["type"] == "table"
    rows = block["rows"]
    assert 1 <= len(rows) <= 100
    for row in rows:
        assert 1 <= len(row) <= 20
        for cell in row:
            assert cell["type"] == "raw_text"  # raw_number's rendering here is unconfirmed
            assert isinstance(cell["text"], str) and len(cell["text"]) >= 1
    settings = block.get("column_settings", [])
    assert len(settings) <= 20
    assert all(s is not None and s["align"] in {"left", "center", "right"} for s in settings)
    assert sum(len(c["text"]) for row in rows for c in row) <= 10_000


def check_chart(block: dict[str, Any]) -> None:
    assert block["type"] == "data_visualization"
    assert isinstance(block["title"], str) and 1 <= len(block["title"]) <= 50
    chart = block["chart"]
    assert chart["type"] in {"pie", "bar", "area", "line"}
    if chart["type"] == "pie":
        assert set(chart) == {"type", "segments"}
        assert 1 <= len(chart["segments"]) <= 6
        for segment in chart["segments"]:
            assert 1 <= len(segment["label"]) <= 20
            assert type(segment["value"]) in (int, float) and segment["value"] > 0
        return
    axis = chart["axis_config"]
    categories = axis["categories"]
    assert categories and all(isinstance(c, str) and 1 <= len(c) <= 20 for c in categories)
    assert len(set(categories)) == len(categories)
    for label in ("x_label", "y_label"):
        assert len(axis.get(label, "")) <= 50
    assert 1 <= len(chart["series"]) <= 6
    names = [s["name"] for s in chart["series"]]
    assert len(set(names)) == len(names) and all(1 <= len(n) <= 20 for n in names)
    for series in chart["series"]:
        assert 1 <= len(series["data"]) <= 20
        assert [p["label"] for p in series["data"]] == categories  # each category once
        for point in series["data"]:
            assert type(point["value"]) in (int, float) and math.isfinite(point["value"])


# --- tables ------------------------------------------------------------------------------


def table(rows: int, columns: int = 2, *, total: int | None = None, cell: str = "") -> Table:
    header = tuple(f"col{c}" for c in range(columns))
    body = tuple(
        tuple(cell or (f"r{r}" if c == 0 else f"{r * 1000 + c:,}") for c in range(columns))
        for r in range(rows)
    )
    return Table("Top countries", header, body, rows if total is None else total)


COUNTRIES = Table(
    "Population",
    ("Country", "Population", "Growth", "Note"),
    (
        ("India", "1,402,617,695", "1.2%", ""),
        ("China", "1,400,000,000", "n/a", "peak"),
        ("US", "(331)", "0.5%", ""),
    ),
    3,
)


def test_constants() -> None:
    assert TABLE_KINDS == ("data_table", "table", "monospace")
    assert data_blocks.tables_per_message == 1 and data_blocks.charts_per_message == 2


def test_data_table_numbers_sort_as_numbers_and_text_stays_text() -> None:
    blocks, capped = table_blocks(COUNTRIES, "data_table", csv_name=None)
    assert not capped and len(blocks) == 1
    [block] = blocks
    check_data_table(block)
    assert block["caption"] == "Population"
    assert block["page_size"] == 3 and block["row_header_column_index"] == 0
    header, india, china, us = block["rows"]
    assert all(c["type"] == "raw_text" for c in header)
    assert [c["text"] for c in header] == ["Country", "Population", "Growth", "Note"]
    assert india[0] == {"type": "raw_text", "text": "India"}
    assert india[1] == {"type": "raw_number", "value": 1402617695, "text": "1,402,617,695"}
    assert us[1] == {"type": "raw_number", "value": -331, "text": "(331)"}
    # One "n/a" makes Growth a text column; empty cells are a space, never "".
    assert china[2] == {"type": "raw_text", "text": "n/a"} and india[2]["type"] == "raw_text"
    assert india[3] == {"type": "raw_text", "text": " "}


def test_an_empty_cell_in_a_number_column_is_a_space() -> None:
    t = Table("t", ("a", "n"), (("x", "1.5"), ("y", "")), 2)
    [block], _ = table_blocks(t, "data_table", csv_name=None)
    check_data_table(block)
    assert block["rows"][1][1] == {"type": "raw_number", "value": 1.5, "text": "1.5"}
    assert block["rows"][2][1] == {"type": "raw_text", "text": " "}


def test_page_size_is_at_most_ten() -> None:
    [block], _ = table_blocks(table(40), "data_table", csv_name=None)
    assert block["page_size"] == 10


def test_300_rows_keep_the_first_100_and_say_where_the_rest_is() -> None:
    blocks, capped = table_blocks(table(300), "data_table", csv_name="top.csv")
    assert capped
    block, note = blocks
    check_data_table(block)
    assert len(block["rows"]) == 101
    assert block["rows"][-1][0]["text"] == "r99"
    assert note == {
        "type": "context",
        "elements": [
            {
                "type": "mrkdwn",
                "text": "Showing the first 100 of 300 rows; "
                "the whole table is attached as top.csv.",
            }
        ],
    }
    _, bare = table_blocks(table(300), "data_table", csv_name=None)[0]
    assert bare["elements"][0]["text"] == "Showing the first 100 of 300 rows."


def test_a_csv_tables_total_counts_even_when_all_kept_rows_fit() -> None:
    blocks, capped = table_blocks(table(100, total=250), "data_table", csv_name="big <1>.csv")
    assert capped and len(blocks[0]["rows"]) == 101
    text = blocks[1]["elements"][0]["text"]
    assert "the first 100 of 250 rows" in text and "big &lt;1&gt;.csv" in text


def test_21_columns_keep_20_and_say_so() -> None:
    for kind in ("data_table", "table"):
        blocks, capped = table_blocks(table(3, columns=21), kind, csv_name="t.csv")
        assert capped
        (check_data_table if kind == "data_table" else check_table)(blocks[0])
        assert all(len(row) == 20 for row in blocks[0]["rows"])
        assert "the first 20 of 21 columns" in blocks[1]["elements"][0]["text"]
    _, capped = table_blocks(table(3, columns=20), "data_table", csv_name=None)
    assert not capped


def test_the_10000_character_budget_drops_rows_from_the_end() -> None:
    wide = table(60, columns=4, cell="x" * 60)  # 240 characters a row
    for kind in ("data_table", "table"):
        blocks, capped = table_blocks(wide, kind, csv_name=None)
        assert capped
        rows = blocks[0]["rows"]
        total = sum(len(c["text"]) for row in rows for c in row)
        assert total <= 10_000 and total + 240 > 10_000  # as many rows as fit
        assert len(rows) - 1 == (10_000 - 4 * 4) // 240
        assert f"the first {len(rows) - 1} of 60 rows" in blocks[1]["elements"][0]["text"]


def test_cells_are_clipped_to_500_characters() -> None:
    t = Table("t", ("h" * 900, "b"), (("v" * 900, "1"),), 1)
    [block], capped = table_blocks(t, "data_table", csv_name=None)
    check_data_table(block)
    assert not capped
    assert len(block["rows"][0][0]["text"]) == 500 and block["rows"][0][0]["text"].endswith("…")
    assert len(block["rows"][1][0]["text"]) == 500


def test_a_header_at_the_budget_still_leaves_room_for_a_row() -> None:
    t = Table("t", tuple("h" * 600 for _ in range(20)), (tuple("v" * 600 for _ in range(20)),), 1)
    for kind, check in (("data_table", check_data_table), ("table", check_table)):
        [block], capped = table_blocks(t, kind, csv_name=None)
        check(block)
        assert len(block["rows"]) == 2 and not capped


def test_table_block_uses_text_cells_and_right_aligns_numbers() -> None:
    blocks, capped = table_blocks(table(300), "table", csv_name="top.csv")
    assert capped
    block, note = blocks
    check_table(block)
    assert len(block["rows"]) == 100  # the header counts in a table block's 100
    assert block["column_settings"] == [{"align": "left"}, {"align": "right"}]
    assert block["rows"][1][1] == {"type": "raw_text", "text": "1"}
    assert "the first 99 of 300 rows" in note["elements"][0]["text"]


def test_monospace_is_a_preformatted_block_under_a_bold_caption() -> None:
    blocks, capped = table_blocks(table(300), "monospace", csv_name="top.csv")
    assert capped
    block, note = blocks
    assert block["type"] == "rich_text"
    section, pre = block["elements"]
    assert section["type"] == "rich_text_section"
    assert section["elements"][0]["style"] == {"bold": True}
    assert section["elements"][0]["text"].strip() == "Top countries"
    assert pre["type"] == "rich_text_preformatted"
    text = pre["elements"][0]["text"]
    assert len(text) <= 2900 and text.splitlines()[0].split() == ["col0", "col1"]
    shown = len(text.splitlines()) - 2
    assert 0 < shown < 300
    assert f"the first {shown} of 300 rows" in note["elements"][0]["text"]
    small, capped = table_blocks(COUNTRIES, "monospace", csv_name=None)
    assert not capped and len(small) == 1


def test_captions_are_clipped_and_never_empty() -> None:
    long = Table("c" * 300, ("a",), (("1",),), 1)
    [block], _ = table_blocks(long, "data_table", csv_name=None)
    assert len(block["caption"]) == 200
    blank = Table("  ", ("a",), (("1",),), 1)
    [block], _ = table_blocks(blank, "data_table", csv_name=None)
    assert block["caption"] == "Table"


def test_a_table_without_rows_is_shown_as_text_and_unknown_kinds_are_refused() -> None:
    empty = Table("t", ("a", "b"), (), 0)
    [block], capped = table_blocks(empty, "data_table", csv_name=None)
    assert block["type"] == "rich_text" and not capped
    with pytest.raises(ValueError):
        table_blocks(COUNTRIES, "markdown", csv_name=None)


def test_ragged_rows_are_fitted_and_a_table_needs_a_column() -> None:
    ragged = Table("t", ("a", "b", "c"), (("1",), ("1", "2", "3", "4")), 2)
    for kind, check in (("data_table", check_data_table), ("table", check_table)):
        [block], _ = table_blocks(ragged, kind, csv_name=None)
        check(block)
    with pytest.raises(ValueError):
        table_blocks(Table("t", (), ((),), 1), "data_table", csv_name=None)


def test_the_pointer_left_in_the_text() -> None:
    assert wording.table_pointer(1, "Top countries") == "_Table 1 below: Top countries_"


# --- charts ------------------------------------------------------------------------------


def chart(**changes: Any) -> Chart:
    fields: dict[str, Any] = {
        "version": 1,
        "image": "figure-1.png",
        "kind": "bar",
        "title": "Population growth",
        "x_label": "Country",
        "y_label": "people",
        "categories": ("India", "China"),
        "series": (Series("2010", (1.0, 2.0)), Series("2020", (3.0, -4.5))),
        "segments": (),
        "note": "",
    }
    fields.update(changes)
    return Chart(**fields)


def fits(c: Chart) -> dict[str, Any]:
    block, reason = chart_block(c)
    assert block is not None, reason
    check_chart(block)
    return block


def refused(c: Chart) -> str:
    block, reason = chart_block(c)
    assert block is None and reason
    return reason


def test_a_bar_chart_fits_with_every_category_in_every_series() -> None:
    block = fits(chart())

    def points(*values: float) -> list[dict[str, Any]]:
        return [{"label": c, "value": v} for c, v in zip(("India", "China"), values, strict=True)]

    assert block == {
        "type": "data_visualization",
        "title": "Population growth",
        "chart": {
            "type": "bar",
            "series": [
                {"name": "2010", "data": points(1, 2)},
                {"name": "2020", "data": points(3, -4.5)},
            ],
            "axis_config": {
                "categories": ["India", "China"], "x_label": "Country", "y_label": "people"
            },
        },
    }  # fmt: skip
    assert chart_block(chart())[1] == "Slack-drawable"


@pytest.mark.parametrize(("kind", "slack"), [("barh", "bar"), ("line", "line"), ("area", "area")])
def test_kinds_map_to_slacks_chart_types(kind: str, slack: str) -> None:
    assert fits(chart(kind=kind))["chart"]["type"] == slack


def test_an_unknown_kind_does_not_fit() -> None:
    assert refused(chart(kind="unknown"))


def test_the_title_falls_back_to_the_y_label_then_the_image_name() -> None:
    assert fits(chart(title=""))["title"] == "people"
    assert fits(chart(title="", y_label=""))["title"] == "figure-1"
    long = fits(chart(title="t" * 80))["title"]
    assert len(long) == 50 and long.endswith("…")


def test_axis_labels_are_clipped_to_50_and_left_out_when_empty() -> None:
    axis = fits(chart(x_label="x" * 80, y_label=""))["chart"]["axis_config"]
    assert len(axis["x_label"]) == 50 and "y_label" not in axis


def test_six_series_fit_and_seven_do_not() -> None:
    six = tuple(Series(f"s{i}", (1.0, 2.0)) for i in range(6))
    assert len(fits(chart(series=six))["chart"]["series"]) == 6
    seven = tuple(Series(f"s{i}", (1.0, 2.0)) for i in range(7))
    assert "6" in refused(chart(series=seven))
    assert refused(chart(series=()))


def test_series_names_are_filled_in_and_clipped_but_must_stay_unique() -> None:
    named = fits(chart(series=(Series("", (1.0, 2.0)), Series("n" * 30, (1.0, 2.0)))))
    names = [s["name"] for s in named["chart"]["series"]]
    assert names[0] == "Series 1" and len(names[1]) == 20 and names[1].endswith("…")
    clash = (Series("x" * 25 + "a", (1.0, 2.0)), Series("x" * 25 + "b", (1.0, 2.0)))
    assert refused(chart(series=clash))
    assert refused(chart(series=(Series("same", (1.0, 2.0)), Series("same", (1.0, 2.0)))))


def test_twenty_categories_fit_and_twenty_one_do_not() -> None:
    def many(n: int) -> Chart:
        return chart(categories=tuple(f"c{i}" for i in range(n)), series=(Series("s", (1.0,) * n),))

    assert len(fits(many(20))["chart"]["axis_config"]["categories"]) == 20
    assert "20" in refused(many(21))
    assert refused(chart(categories=(), series=(Series("s", ()),)))


def test_categories_are_clipped_while_unique_and_never_empty() -> None:
    long = ("Democratic Republic of the Congo", "China")
    block = fits(chart(categories=long))
    categories = block["chart"]["axis_config"]["categories"]
    assert categories[0] == "Democratic Republic…" and len(categories[0]) == 20
    assert block["chart"]["series"][0]["data"][0]["label"] == categories[0]
    assert refused(chart(categories=("United States of America", "United States of Americas")))
    assert refused(chart(categories=("", "China")))
    assert refused(chart(categories=("India", "India")))


def test_a_gap_or_a_value_that_is_not_finite_does_not_fit() -> None:
    assert refused(chart(series=(Series("s", (1.0, None)),)))
    assert refused(chart(series=(Series("s", (1.0, math.inf)),)))
    assert refused(chart(series=(Series("s", (1.0, math.nan)),)))
    assert refused(chart(series=(Series("s", (1.0,)),)))  # a value short
    assert refused(chart(kind="pie", segments=(Segment("a", math.inf),)))


def test_a_pie_fits_with_positive_slices() -> None:
    pie = chart(kind="pie", segments=(Segment("Organic", 60.0), Segment("", 40.5)), series=())
    block = fits(pie)
    assert block["chart"] == {
        "type": "pie",
        "segments": [{"label": "Organic", "value": 60}, {"label": "Slice 2", "value": 40.5}],
    }
    long = fits(chart(kind="pie", segments=(Segment("l" * 30, 1.0),)))
    assert len(long["chart"]["segments"][0]["label"]) == 20


@pytest.mark.parametrize(
    "segments",
    [
        (),
        tuple(Segment(f"s{i}", 1.0) for i in range(7)),
        (Segment("a", 0.0),),
        (Segment("a", -1.0),),
    ],
    ids=["none", "seven", "zero", "negative"],
)
def test_a_pie_does_not_fit(segments: tuple[Segment, ...]) -> None:
    assert refused(chart(kind="pie", segments=segments))


def test_six_slices_fit() -> None:
    six = tuple(Segment(f"s{i}", 1.0) for i in range(6))
    assert len(fits(chart(kind="pie", segments=six))["chart"]["segments"]) == 6


def test_a_long_file_name_in_the_note_is_clipped_and_escaped() -> None:
    blocks, _ = table_blocks(table(300), "data_table", csv_name="<" + "n" * 5000 + ".csv")
    text = blocks[1]["elements"][0]["text"]
    assert len(text) < 500 and "…" in text and "&lt;" in text and "<" not in text


def test_the_table_and_monospace_blocks_are_slack_sdks_own_models() -> None:
    """The two kinds slack_sdk 3.48 models (data_table and data_visualization it does not):
    rebuilt from its classes, they come out the same."""
    table = Table("Totals", ("Region", "Total"), (("North", "1,204"), ("South", "980")), 2)
    for kind in ("table", "monospace"):
        blocks, _ = table_blocks(table, kind, csv_name=None)
        for block in blocks:
            model = Block.parse(block)
            assert model is not None and model.type == block["type"]
            model.validate_json()
            assert model.to_dict() == block


# --- what Slack receives: the blocks after the way out escapes `<!…>` ----------------------


def sent(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks as they leave the process (web/outgoing.py), and Slack's verdict on them."""
    from bot.slack.web.outgoing import Outgoing
    from tests.fakes.slack.kit import block_problems
    from tests.fakes.slack.surfaces import SurfaceRules

    out = Outgoing().data(blocks)
    assert block_problems(out, rules=SurfaceRules()) == []
    return out


@pytest.mark.parametrize("kind", ["data_table", "table"])
def test_cells_that_grow_when_escaped_still_fit_once_sent(kind: str) -> None:
    """`<!x>` is 4 characters, `&lt;!x&gt;` 10: the budget counts what Slack gets."""
    hostile = table(100, 20, cell="<!x>")
    blocks, capped = table_blocks(hostile, kind, csv_name="all.csv")
    [block, _note] = sent(blocks)
    assert capped and len(block["rows"]) > 2
    assert block["rows"][1][0]["text"] == "&lt;!x&gt;"


def test_a_caption_that_grows_when_escaped_stays_a_caption() -> None:
    hostile = Table("<!x>" * 100, ("a",), (("1",),), 1)
    [block] = sent(table_blocks(hostile, "data_table", csv_name=None)[0])
    assert len(block["caption"]) <= data_blocks.CAPTION_MAX and "<!" not in block["caption"]


def test_monospace_text_is_escaped_before_it_is_measured() -> None:
    hostile = table(200, 5, cell="<!x>")
    [block, _note] = sent(table_blocks(hostile, "monospace", csv_name=None)[0])
    text = block["elements"][1]["elements"][0]["text"]
    assert len(text) <= data_blocks.MONOSPACE_MAX and "&lt;!x&gt;" in text


def test_chart_names_that_grow_when_escaped_still_fit_once_sent() -> None:
    bar = chart(
        title="<!x>" * 13,
        x_label="<!x>" * 12,
        categories=("<!a>" * 5, "<!b>" * 5),
        series=(Series("<!s>" * 5, (1.0, 2.0)),),
    )
    [block] = sent([fits(bar)])
    check_chart(block)
    pie = chart(kind="pie", segments=(Segment("<!p>" * 5, 1.0),))
    [block] = sent([fits(pie)])
    check_chart(block)
