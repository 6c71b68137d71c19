"""Tables as data: numbers read as people write them, GFM tables found in an answer (not in
code), CSVs of any bytes, and the CSV and monospace forms."""

from __future__ import annotations

import csv
import io

import pytest

from bot.results.tables import (
    Table,
    find_tables,
    monospace,
    number_columns,
    parse_number,
    table_from_csv,
    to_csv,
    without_tables,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1,402,617,695", 1402617695.0),
        ("1402617695", 1402617695.0),
        ("-3.2", -3.2),
        ("−3.2", -3.2),
        ("+4", 4.0),
        ("4.7%", 4.7),
        ("4.7 %", 4.7),
        ("$125,000", 125000.0),
        ("€1.2", 1.2),
        ("-$5", -5.0),
        ("12.5 M", 12_500_000.0),
        ("1.2k", 1200.0),
        ("3B", 3e9),
        ("(1,234)", -1234.0),
        ("1\u2009234", 1234.0),
        ("1\u00a0234\u00a0567", 1234567.0),
        ("**12**", 12.0),
        ("`7.5`", 7.5),
        (" 42 ", 42.0),
        ("2000", 2000.0),
        (".5", 0.5),
        ("1e5", 1e5),
    ],
)
def test_numbers_are_read_as_people_write_them(text: str, value: float) -> None:
    assert parse_number(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text",
    [
        "n/a",
        "",
        "—",
        "-",
        "abc",
        "2020-01-02",
        "1.2.3",
        "12 apples",
        "k",
        "$",
        "(x)",
        "1,23",
        "--5",
        "1e999",
    ],
)
def test_what_is_not_a_number_is_none(text: str) -> None:
    assert parse_number(text) is None


ANSWER = """Here is what I found.

## Top countries:
| Country | Population | Note |
|:--|--:|---|
| **India** | 1,402,617,695 | [source](https://example.com) \\| UN |
| China | 1,400,000,000 |
| `US` | 331,000,000 | third | extra |

```
| not | a table |
|-----|---------|
| 1   | 2       |
```

a | b
--|--
1 | 2

That's all."""


def test_tables_are_found_with_their_spans_and_display_cells() -> None:
    found = find_tables(ANSWER)
    assert len(found) == 2  # the one in the code block is left alone
    (start, end, first), (start2, end2, second) = found
    assert ANSWER[start:end].startswith("| Country") and ANSWER[start:end].endswith("extra |")
    assert first.caption == "Top countries"
    assert first.header == ("Country", "Population", "Note")
    assert first.rows == (
        ("India", "1,402,617,695", "source | UN"),
        ("China", "1,400,000,000", ""),  # padded
        ("US", "331,000,000", "third"),  # cut to the header's width
    )
    assert first.total_rows == 3
    assert ANSWER[start2:end2] == "a | b\n--|--\n1 | 2"
    assert second.caption == "Table 2" and second.rows == (("1", "2"),)


@pytest.mark.parametrize(
    ("cell", "shown"),
    [
        ("**bold** and __under__", "bold and under"),
        ("`__init__`", "__init__"),
        ("`**x**`", "**x**"),
        ("snake__case__name", "snake__case__name"),
        ("\\*literal\\*", "*literal*"),
        ("**[India](https://example.com)**", "India"),
        ("~~old~~ *new*", "old new"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("one<br>two", "one two"),
        ("nul\x00byte", "nulbyte"),
    ],
)
def test_cells_are_shown_without_their_markup(cell: str, shown: str) -> None:
    [(_, _, table)] = find_tables(f"| h |\n|---|\n| {cell} |")
    assert table.rows == ((shown,),)


def test_a_caption_is_a_heading_or_a_line_ending_in_a_colon() -> None:
    plain = "Some words\n\n| a |\n|---|\n| 1 |"
    colon = "**Revenue by region:**\n| a |\n|---|\n| 1 |"
    long = "# " + "x" * 400 + "\n| a |\n|---|\n| 1 |"
    assert find_tables(plain)[0][2].caption == "Table 1"
    assert find_tables(colon)[0][2].caption == "Revenue by region"
    assert len(find_tables(long)[0][2].caption) <= 150


def test_a_header_without_a_delimiter_row_or_body_is_not_a_table() -> None:
    assert find_tables("| a | b |\n| c | d |") == []
    assert find_tables("| a | b |\n|---|---|\n\nnext") == []
    assert find_tables("| a | b |\n|---|\n| 1 | 2 |") == []  # widths differ


def test_tilde_fences_and_unclosed_fences_hide_tables() -> None:
    assert find_tables("~~~\n| a |\n|---|\n| 1 |\n~~~") == []
    assert find_tables("```python\n| a |\n|---|\n| 1 |") == []
    after = "```\ncode\n```\n| a |\n|---|\n| 1 |"
    assert len(find_tables(after)) == 1


def test_windows_line_breaks_keep_spans_exact() -> None:
    text = "x\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\nend"
    [(start, end, table)] = find_tables(text)
    assert text[start:end] == "| a | b |\r\n|---|---|\r\n| 1 | 2 |"
    assert table.rows == (("1", "2"),)


def test_without_tables_puts_a_pointer_in_each_tables_place() -> None:
    found = find_tables(ANSWER)
    text = without_tables(ANSWER, found, lambda i, t: f"[table {i + 1}: {t.caption}]")
    assert "[table 1: Top countries]" in text and "[table 2: Table 2]" in text
    assert "1,402,617,695" not in text
    assert "| not | a table |" in text  # the code block is untouched
    assert text.startswith("Here is what I found.") and text.endswith("That's all.")


def test_number_columns_need_every_non_empty_cell_to_be_a_number() -> None:
    table = Table("t", ("a", "b", "c", "d"), (("x", "1", "1", ""), ("y", "", "n/a", "")), 2)
    assert number_columns(table) == (False, True, False, False)


def test_a_csv_is_read_with_its_delimiter_and_counted_whole() -> None:
    body = "name;value\n" + "".join(f"r{i};{i}\n" for i in range(250))
    table = table_from_csv(body.encode(), "top", max_rows=100)
    assert table is not None
    assert table.header == ("name", "value") and len(table.rows) == 100
    assert table.total_rows == 250 and table.rows[0] == ("r0", "0")
    tabs = table_from_csv(b"a\tb\n1\t2\n", "t")
    assert tabs is not None and tabs.rows == (("1", "2"),)


def test_csv_encodings_bom_and_latin1() -> None:
    bom = table_from_csv("\ufeffcity,n\nZürich,1\n".encode(), "t")
    assert bom is not None and bom.header == ("city", "n") and bom.rows[0][0] == "Zürich"
    latin = table_from_csv("city,n\nZürich,1\n".encode("latin-1"), "t")
    assert latin is not None and latin.rows[0][0] == "Zürich"


@pytest.mark.parametrize(
    "data",
    [b"", b"\n\n", b"only,a,header\n", b",,\n,,\n", b"\x00\x01\x02"],
    ids=["empty", "blank", "header-only", "empty-cells", "binary"],
)
def test_what_is_not_a_table_gives_none(data: bytes) -> None:
    assert table_from_csv(data, "t") is None


def test_hostile_csv_fields_and_widths_are_bounded() -> None:
    huge_field = b"a,b\n" + b"x" * 200_000 + b",1\n"  # over csv's field limit, or clipped
    result = table_from_csv(huge_field, "t")
    assert result is None or all(len(c) <= 1000 for c in result.rows[0])
    wide = ",".join(f"c{i}" for i in range(5000)).encode() + b"\n" + b"1," * 4999 + b"1\n"
    table = table_from_csv(wide, "t")
    assert table is not None and len(table.header) <= 100
    long_cell = table_from_csv(b"a\n" + b"y" * 5000 + b"\n", "t")
    assert long_cell is not None and len(long_cell.rows[0][0]) <= 1000


def test_an_unclosed_quote_and_control_characters_stay_inside_cells() -> None:
    table = table_from_csv(b'a,b\n"1,2\n3,4\n', "t")
    assert table is not None and table.rows == (("1,2\n3,4", ""),)
    junk = table_from_csv(b"h\n\x1b[31mred\x07\n", "t")
    assert junk is not None and junk.rows == (("[31mred",),)


def test_ragged_csv_rows_fit_the_header() -> None:
    table = table_from_csv(b"a,b,c\n1\n1,2,3,4\n", "t")
    assert table is not None and table.rows == (("1", "", ""), ("1", "2", "3"))


def test_to_csv_round_trips_the_whole_table() -> None:
    table = Table("t", ("name", "note"), (("a,b", 'say "hi"'), ("Zürich", "")), 2)
    rows = list(csv.reader(io.StringIO(to_csv(table).decode("utf-8"))))
    assert rows == [["name", "note"], ["a,b", 'say "hi"'], ["Zürich", ""]]


def test_monospace_aligns_numbers_right_and_underlines_the_header() -> None:
    table = Table("t", ("Country", "Pop"), (("India", "1,402"), ("US", "3")), 2)
    text, shown = monospace(table, 1000)
    assert shown == 2
    assert text.splitlines() == [
        "Country    Pop",
        "-------  -----",
        "India    1,402",
        "US           3",
    ]


def test_monospace_shows_as_many_rows_as_fit() -> None:
    rows = tuple((f"row{i}", str(i)) for i in range(500))
    table = Table("t", ("name", "n"), rows, 500)
    text, shown = monospace(table, 300)
    assert len(text) <= 300 and 0 < shown < 500
    assert len(text.splitlines()) == shown + 2
    bigger, more = monospace(table, 3000)
    assert more > shown and len(bigger) <= 3000
    tiny, none = monospace(table, 5)
    assert len(tiny) <= 5 and none == 0


def test_monospace_keeps_cells_on_one_line() -> None:
    table = Table("t", ("a",), (("two\nlines\tand tab",), ("z" * 500,)), 2)
    text, shown = monospace(table, 10_000)
    assert shown == 2 and len(text.splitlines()) == 4
    assert max(len(line) for line in text.splitlines()) <= 60


def test_monospace_shows_exactly_as_many_rows_as_fit() -> None:
    rows = tuple((f"r{i}", "x" * (i % 7)) for i in range(200))  # short, ragged line ends
    table = Table("t", ("name", "a long header"), rows, 200)
    for limit in (100, 333, 1000, 1900):
        text, shown = monospace(table, limit)
        assert len(text) <= limit
        assert shown < 200
        more = Table("t", table.header, rows[: shown + 1], shown + 1)
        assert len(monospace(more, 10**6)[0]) > limit  # one more row would not fit


def test_monospace_fits_ragged_rows_to_the_header() -> None:
    table = Table("t", ("a", "b"), (("1",), ("1", "2", "3")), 2)
    text, shown = monospace(table, 1000)
    assert shown == 2 and text.splitlines()[2:] == ["1", "1  2"]
