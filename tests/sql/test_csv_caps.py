"""The server's CSV through the caps: records counted with quotes and newlines inside
fields, cut only at a record's end, whatever the chunks' boundaries."""

from __future__ import annotations

import csv
import io

import pytest

from bot.sql.copy_out import CsvCaps, copy_of
from bot.sql.csv_records import record_span

ROWS = [["1", "plain"], ["2", 'a "quoted"\nline'], ["3", "x,y"], ["4", "\n\n"], ["5", ""]]


def as_csv(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([["id", "text"], *rows])
    return out.getvalue().encode()


def through(data: bytes, size: int, **caps: int) -> tuple[bytes, CsvCaps]:
    capper = CsvCaps(caps.get("max_rows", 100), caps.get("max_bytes", 1 << 20))
    kept = b""
    for at in range(0, len(data), size):
        kept += capper.take(data[at : at + size])
        if capper.capped:
            break
    else:
        kept += capper.rest()
    return kept, capper


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_records_are_counted_across_any_chunking(size: int) -> None:
    data = as_csv(ROWS)
    kept, caps = through(data, size)
    assert kept == data and caps.records == len(ROWS) + 1 and not caps.capped


def test_a_span_stops_at_its_room_and_limit() -> None:
    data = as_csv(ROWS)
    assert record_span(data, len(data), 100) == (6, len(data))
    assert record_span(data, len(data), 2) == (2, data.index(b"2,"))
    assert record_span(data, 5, 100) == (0, 0)


@pytest.mark.parametrize("size", [1, 3, 1000])
@pytest.mark.parametrize("max_rows", [1, 2, 4, 5, 6])
def test_the_row_cap_cuts_at_a_record_end(size: int, max_rows: int) -> None:
    kept, caps = through(as_csv(ROWS), size, max_rows=max_rows)
    rows = list(csv.reader(io.StringIO(kept.decode())))
    assert rows == [["id", "text"], *ROWS[:max_rows]]
    assert caps.records == min(max_rows, len(ROWS)) + 1
    assert bool(caps.capped) == (max_rows < len(ROWS))


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_the_byte_cap_cuts_at_a_record_end(size: int) -> None:
    data = as_csv(ROWS)
    kept, caps = through(data, size, max_bytes=30)
    rows = list(csv.reader(io.StringIO(kept.decode())))
    assert len(kept) <= 30 and caps.capped.startswith("the size cap")
    assert rows == [["id", "text"], *ROWS[: len(rows) - 1]]


def test_the_preview_reads_the_columns_and_first_rows() -> None:
    _, caps = through(as_csv(ROWS), 4)
    columns, preview = caps.table(2)
    assert columns == ["id", "text"] and preview == [tuple(r) for r in ROWS[:2]]


@pytest.mark.parametrize(
    ("sql", "copied"),
    [
        ("SELECT 1", True),
        ("SELECT 1 -- a trailing comment", True),
        ("WITH a AS (SELECT 1) SELECT * FROM a", True),
        ("SELECT $$ ) TO PROGRAM 'id' $$", True),  # a string, inside the COPY
        ("EXPLAIN SELECT 1", False),
        ("SELECT 1;", False),
        ("SELECT 1) TO PROGRAM 'id' --", False),
    ],
)
def test_only_a_query_that_stays_inside_goes_into_copy(sql: str, copied: bool) -> None:
    assert (copy_of(sql) is not None) == copied
