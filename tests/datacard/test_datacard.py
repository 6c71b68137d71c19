"""Data cards of CSV and TSV files: shape, types, aggregates, malformed rows, awkward bytes."""

from __future__ import annotations

import csv
import io
import json
import random
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

import bot.datacard.csvprof as csvprof
from bot.datacard import DataCard, Profiler
from bot.datacard.aggregates import is_aggregate
from bot.datacard.render import cards_for_model, for_model, for_slack
from bot.datacard.values import date_keys
from tests.support import DATA

POPULATION = DATA / "population_2000_2010_2020.csv"


def card_of(data: bytes, name: str = "file.csv", step: int = 0, **kw: Any) -> DataCard:
    profiler = Profiler(name, **kw)
    for i in range(0, len(data), step or max(1, len(data))):
        profiler.feed(data[i : i + (step or len(data))])
    return profiler.finish()


def types(card: DataCard) -> dict[str, str]:
    return {c.name: c.type for c in card.columns}


def test_population_shape_types_and_ranges() -> None:
    card = card_of(POPULATION.read_bytes(), "population.csv")
    assert (card.kind, card.delimiter, card.header, card.encoding) == ("csv", ",", True, "utf-8")
    assert (card.rows, card.columns_total, card.profiled_rows) == (795, 4, 795)
    assert types(card) == {
        "Country Name": "text",
        "Country Code": "text",
        "Year": "integer",
        "Value": "integer",
    }
    year, value = card.columns[2], card.columns[3]
    assert (year.low, year.high, year.distinct) == (2000, 2020, 3)
    assert value.low == 9544 and value.high == 7_854_748_424
    assert card.columns[1].distinct == 265 and not card.columns[1].distinct_estimated
    assert card.malformed.total == 0


def test_population_aggregate_rows_are_named() -> None:
    card = card_of(POPULATION.read_bytes(), "population.csv")
    assert card.aggregates is not None
    assert card.aggregates.column == "Country Name"
    assert card.aggregates.count == 144  # 48 groups (World, regions, income...) x 3 years
    assert card.aggregates.examples[0] == "World"
    assert "High income" in card.aggregates.examples
    text = for_model(card)
    assert "Aggregate rows: 144" in text and "World" in text


@pytest.mark.parametrize(
    "label",
    [
        "World",
        "Total",
        "Grand total",
        "High income",
        "Low & middle income",
        "Upper middle income",
        "Europe & Central Asia",
        "Sub-Saharan Africa (excluding high income)",
        "East Asia & Pacific",
        "OECD members",
        "Euro area",
        "IDA total",
        "IBRD only",
        "Fragile and conflict affected situations",
        "Arab World",
        "Least developed countries: UN classification",
    ],
)
def test_aggregate_labels(label: str) -> None:
    assert is_aggregate(label)


@pytest.mark.parametrize("label", ["South Africa", "Totally", "Allen", "Central African Republic"])
def test_entity_labels_are_not_aggregates(label: str) -> None:
    assert not is_aggregate(label)


def test_ragged_rows_are_counted_and_located() -> None:
    data = b"a,b,c\n1,2,3\n4,5\n6,7,8\n9,10,11,12\n\n13,14,15\n"
    card = card_of(data)
    m = card.malformed
    assert (m.ragged, m.blank, card.rows) == (2, 1, 5)
    assert [row for row, _ in m.first] == [3, 5]
    assert "2 ragged" in for_model(card)


def test_utf8_bom_is_dropped_from_the_first_column() -> None:
    card = card_of(b"\xef\xbb\xbfname,score\nAda,1\nBob,2\n")
    assert card.encoding == "utf-8 with BOM"
    assert [c.name for c in card.columns] == ["name", "score"]


def test_latin1_file_is_read_as_latin1() -> None:
    data = "city,n\nZürich,1\nSão Paulo,2\nKöln,3\n".encode("latin-1")
    card = card_of(data)
    assert card.encoding in ("cp1252", "latin-1")
    assert "Zürich" in dict(card.columns[0].top)


def test_utf8_file_that_turns_latin1_later_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    head = b"city,n\n" + b"Paris,1\n" * 20_000
    data = head + "Zürich,2\n".encode("latin-1")
    card = card_of(data, block_size=4096)
    assert card.encoding == "utf-8" and card.rows == 20_001
    assert any("Not UTF-8" in note for note in card.notes)


def test_utf16_with_bom_is_transcoded() -> None:
    card = card_of("a\tb\n1\t2\n3\t4\n".encode("utf-16"), "x.tsv")
    assert (card.kind, card.encoding, card.rows, card.columns_total) == ("tsv", "utf-16", 2, 2)


def test_semicolons_and_decimal_commas() -> None:
    data = b"land;wert;jahr\nDeutschland;1,5;2020\n\xc3\x96sterreich;2,25;2021\nSchweiz;3,0;2022\n"
    card = card_of(data)
    assert (card.delimiter, card.rows, card.columns_total) == (";", 3, 3)
    assert types(card)["jahr"] == "integer"


def test_tab_and_pipe_delimiters() -> None:
    assert card_of(b"a\tb\tc\n1\t2\t3\n").delimiter == "\t"
    assert card_of(b"a,b\tc\n1,2\t3\n", kind="tsv").delimiter == "\t"
    assert card_of(b"a,b\tc\n1,2\t3\n").delimiter == ","
    assert card_of(b"a|b|c\n1|2|3\n4|5|6\n").delimiter == "|"


QUOTED = (
    b'id,comment,amount\n1,"line one\nline two, with a comma",10\n'
    b'2,"she said ""hi""",20\n3,"a,b,c",30\n4,5" screen,40\n5,"",50\n'
)


def test_quoted_fields_with_newlines_and_delimiters() -> None:
    card = card_of(QUOTED)
    assert (card.rows, card.columns_total, card.malformed.total) == (5, 3, 0)
    assert types(card) == {"id": "integer", "comment": "text", "amount": "integer"}
    assert card.columns[2].high == 50


def test_same_card_whatever_the_chunking() -> None:
    """Split at every byte offset, and with blocks as small as one byte."""
    want = card_of(QUOTED).to_dict()
    for cut in range(1, len(QUOTED)):
        profiler = Profiler("file.csv")
        profiler.feed(QUOTED[:cut])
        profiler.feed(QUOTED[cut:])
        assert profiler.finish().to_dict() == want, cut
    for block in (1, 2, 3, 5, 8, 13, 64):
        assert card_of(QUOTED, step=7, block_size=block).to_dict() == want, block


def _random_csv(rng: random.Random, fields: int, rows: int, quote_rate: float) -> str:
    lines = [",".join(f"h{j}" for j in range(fields))]
    for _ in range(rows):
        if rng.random() < 0.05:
            lines.append("")
            continue
        width = fields if rng.random() > 0.1 else rng.choice([fields - 1, fields + 1, 1])
        cells = []
        for _ in range(width):
            r = rng.random()
            if r < quote_rate:
                cells.append(rng.choice(['"a,b"', '"x\ny"', '"q""q"', '""', '"\n"', '"a"b']))
            elif r < quote_rate + 0.1:
                cells.append(rng.choice(['5" tv', 'a"b', "x"]))
            else:
                cells.append(str(rng.randint(0, 99)))
        lines.append(",".join(cells))
    return "\n".join(lines) + rng.choice(["", "\n", "\r\n"])


@pytest.mark.parametrize("quote_rate", [0.0, 0.02, 0.3, 0.9])
def test_records_match_the_csv_module(quote_rate: float) -> None:
    """Random CSV with quoted newlines, escaped quotes, stray quotes, ragged and blank rows:
    the record count and the ragged rows agree with Python's csv module, for any blocks."""
    rng = random.Random(quote_rate)
    for _ in range(60):
        fields = rng.randint(2, 5)
        text = _random_csv(rng, fields, rng.randint(0, 30), quote_rate)
        rows = list(csv.reader(io.StringIO(text, newline=""), strict=False))
        ragged = [i + 1 for i, r in enumerate(rows) if r and len(r) != fields]
        blank = sum(not r for r in rows)
        for block in (1, 4, 17, 1 << 20):
            card = card_of(text.encode(), step=rng.randint(1, 9), block_size=block)
            m = card.malformed
            assert (card.rows + 1 + m.blank, m.blank, m.ragged) == (len(rows), blank, len(ragged))
            assert [row for row, _ in m.first] == ragged[:5]


def test_every_field_quoted() -> None:
    rows = [f'"{i}","2024-01-{i % 28 + 1:02d}","name {i}","{i * 1.5}"' for i in range(5000)]
    data = ('"id","day","name","x"\n' + "\n".join(rows) + "\n").encode()
    card = card_of(data, block_size=4096)
    assert (card.rows, card.malformed.total) == (5000, 0)
    assert types(card) == {"id": "integer", "day": "date", "name": "text", "x": "decimal"}
    assert (card.columns[1].low, card.columns[1].high) == ("2024-01-01", "2024-01-28")


def test_unclosed_quote_is_malformed_and_the_rest_still_counts() -> None:
    data = b'a,b\n1,2\n3,"oops\n5,6\n7,8\n'
    card = card_of(data)
    assert card.malformed.quotes == 1 and card.malformed.first == [
        (3, "a quote that does not close")
    ]
    assert card.rows == 3


def test_a_line_over_the_cap_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csvprof, "LINE_CAP", 1000)
    data = b"a,b\n1,2\n" + b"x" * 5000 + b",3\n4,5\n"
    card = card_of(data, step=300, block_size=256)
    assert card.malformed.overlong == 1 and card.rows == 2
    assert card.malformed.first[0][0] == 3


def test_wide_file_counts_every_column_and_profiles_the_first() -> None:
    width = 100_000
    header = ",".join(f"c{i}" for i in range(width)).encode()
    row = ",".join(str(i % 7) for i in range(width)).encode()
    card = card_of(header + b"\n" + b"\n".join([row] * 5) + b"\n", step=65536)
    assert (card.rows, card.columns_total, len(card.columns)) == (5, width, csvprof.DETAIL)
    assert card.columns[3].type == "integer" and card.malformed.total == 0
    text = for_model(card, 600)
    assert len(text) <= 2400 and "more" in text
    assert len(for_slack(card)) < 800


def test_empty_file() -> None:
    card = card_of(b"")
    assert (card.rows, card.columns_total, card.columns) == (0, 0, [])
    assert "0 rows" in for_model(card)


def test_header_only_file() -> None:
    card = card_of(b"name,age,city\n")
    assert (card.rows, card.columns_total, card.header) == (0, 3, True)
    assert [c.name for c in card.columns] == ["name", "age", "city"]


def test_headerless_numbers_get_numbered_columns() -> None:
    card = card_of(b"1,2.5\n3,4.5\n5,6.5\n")
    assert card.header is False and card.rows == 3
    assert [c.name for c in card.columns] == ["column 1", "column 2"]


def test_types_dates_booleans_missing_and_odd_values() -> None:
    lines = ["when,ok,n,price,label"]
    for i in range(200):
        n = "n/a" if i % 10 == 0 else str(i)
        price = "oops" if i == 7 else f"{i}.5"
        when = f"2023-{i % 12 + 1:02d}-0{i % 9 + 1} 10:00"
        lines.append(f"{when},{'yes' if i % 3 else 'no'},{n},{price},L{i % 4}")
    card = card_of("\n".join(lines).encode())
    got = {c.name: c for c in card.columns}
    assert types(card) == {
        "when": "datetime",
        "ok": "boolean",
        "n": "integer",
        "price": "decimal",
        "label": "text",
    }
    assert got["n"].empty == 20 and got["n"].low == 1
    assert got["price"].odd == 1 and got["price"].odd_examples == ["oops"]
    assert got["when"].low == "2023-01-01 10:00" and got["label"].distinct == 4


@pytest.mark.parametrize(
    ("text", "day_first", "month_first"),
    [
        ("2020-01-31", "2020-01-31", "2020-01-31"),
        ("31/01/2020", "2020-01-31", None),
        ("01/31/2020", None, "2020-01-31"),
        ("2020/1/5 14:05:06", "2020-01-05 14:05:06", "2020-01-05 14:05:06"),
    ],
)
def test_date_keys(text: str, day_first: str | None, month_first: str | None) -> None:
    keys = date_keys(text)
    assert keys is not None and keys[:2] == (day_first, month_first)


def test_card_survives_a_json_round_trip() -> None:
    card = card_of(POPULATION.read_bytes(), "population.csv")
    again = DataCard.from_dict(json.loads(json.dumps(card.to_dict())))
    assert again == card
    assert for_model(again) == for_model(card) and for_slack(again) == for_slack(card)


def test_for_model_shrinks_to_its_budget() -> None:
    card = card_of(POPULATION.read_bytes(), "population.csv")
    full, small = for_model(card, 600), for_model(card, 60)
    assert "mean" in full and len(full) <= 2400
    assert len(small) <= 240 and "795 rows × 4 columns" in small


def test_for_slack_names_the_file_columns_and_aggregates() -> None:
    text = for_slack(card_of(POPULATION.read_bytes(), "population.csv"))
    assert text.startswith("*population.csv* · CSV · 795 rows × 4 columns")
    assert "`Year` integer" in text and ":warning: 144 aggregate rows" in text


def _generated(total: int, block: bytes) -> Iterator[bytes]:
    yield b"id,day,region,amount\n"
    for _ in range(total // len(block)):
        yield block


def test_a_gigabyte_streams_through_in_bounded_memory() -> None:
    """A gigabyte made lazily (one block of rows, fed again and again): rows counted exactly,
    cells profiled on a sample, Python allocations peaking far below the file's size."""
    block = b"".join(
        b"%d,2024-%02d-01,north,%d.25\n" % (i, i % 12 + 1, i % 500) for i in range(40_000)
    )
    profiler = Profiler("big.csv")
    rows = 0
    tracemalloc.start()
    try:
        for piece in _generated(10**9, block):
            profiler.feed(piece)
            rows += piece.count(b"\n")
        card = profiler.finish()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert card.size is not None and card.size > 0.99 * 10**9
    assert card.rows == rows - 1 and card.rows > 30_000_000
    assert card.profiled_rows < 20_000 and card.sampled and peak < 64 << 20
    assert types(card) == {"id": "integer", "day": "date", "region": "text", "amount": "decimal"}
    assert "profiled, spread through the file" in for_model(card)


def test_many_cards_share_one_budget() -> None:
    wide = card_of(",".join(f"c{i}" for i in range(3000)).encode() + b"\n" + b"1," * 2999 + b"1\n")
    cards = [card_of(POPULATION.read_bytes(), "population.csv"), wide, card_of(b"a,b\n1,2\n")]
    text = cards_for_model(cards, 500)
    assert len(text) <= 500 * 4 + 10
    assert "population.csv" in text and "3,000 columns" in text and "file.csv" in text
    assert len(cards_for_model(cards, 3000)) > len(text)
