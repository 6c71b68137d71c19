"""Files written to tie up the bot's CPU while it cards them: each costs no more than some
times a plain file of the same size (the attacks cost thousands of times as much before
they were bounded). Ratios are generous: the machine is shared and noisy."""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import time
import tracemalloc
from collections.abc import AsyncIterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bot.datacard import CardError, card_parquet, card_xlsx, gunzip
from tests.hostile_files import (
    MAIN,
    PLAIN_FLOOR_S,
    gzip_members,
    parquet,
    plain_csv,
    plain_json,
    plain_workbook,
    profiled,
    ratio,
    sheet,
    styles,
    thrift_list_of_empty_structs,
    thrift_nested_lists,
    workbook,
)

MAX_RATIO = 30


def test_one_long_number_format_under_many_styles() -> None:
    hostile = workbook(sheet(), **{"xl/styles.xml": styles(256 << 10, 200)})
    plain = plain_workbook(len(hostile))
    assert (
        ratio(lambda: card_xlsx(hostile, "h.xlsx"), lambda: card_xlsx(plain, "p.xlsx")) < MAX_RATIO
    )
    (card,) = card_xlsx(hostile, "h.xlsx")
    assert card.rows == 20  # the sheet is still carded


def test_many_styles_and_formats_are_read_once_each() -> None:
    many = (
        f"<styleSheet {MAIN}><numFmts>"
        + "".join(f'<numFmt numFmtId="{164 + i}" formatCode="yyyy-mm-dd"/>' for i in range(50_000))
        + "</numFmts><cellXfs>"
        + '<xf numFmtId="170"/>' * 200_000
        + "</cellXfs></styleSheet>"
    )
    hostile = workbook(sheet(), **{"xl/styles.xml": many})
    plain = plain_workbook(len(hostile))
    assert (
        ratio(lambda: card_xlsx(hostile, "h.xlsx"), lambda: card_xlsx(plain, "p.xlsx")) < MAX_RATIO
    )


def test_a_huge_cell_reference() -> None:
    ref = "A" * 50_000 + "1"
    hostile = workbook(
        f'<worksheet {MAIN}><dimension ref="A1:{ref}"/><sheetData><row r="1">'
        f'<c r="{ref}"><v>1</v></c><c r="B{"9" * 5000}"><v>2</v></c></row></sheetData></worksheet>'
    )
    plain = plain_workbook(len(hostile))
    assert (
        ratio(lambda: card_xlsx(hostile, "h.xlsx"), lambda: card_xlsx(plain, "p.xlsx")) < MAX_RATIO
    )


def test_row_tags_that_never_close_in_a_sheet_without_its_size() -> None:
    hostile = workbook(sheet(dimension=False) + "<!--" + "<row " * 50_000 + "-->")
    plain = workbook(sheet(dimension=False, pad=len(hostile)))
    assert (
        ratio(lambda: card_xlsx(hostile, "h.xlsx"), lambda: card_xlsx(plain, "p.xlsx")) < MAX_RATIO
    )


def test_a_row_of_millions_of_cells_is_read_in_little_memory() -> None:
    cells = "<c/>" * (2 << 20)  # 8 MB: as a tree, hundreds of megabytes
    hostile = workbook(
        f'<worksheet {MAIN}><sheetData><row r="1">{cells}</row></sheetData></worksheet>'
    )
    plain = plain_workbook(len(hostile))
    assert (
        ratio(lambda: card_xlsx(hostile, "h.xlsx"), lambda: card_xlsx(plain, "p.xlsx")) < MAX_RATIO
    )
    (card,) = card_xlsx(hostile, "h.xlsx")
    assert card.notes[-1].startswith("Too many XML elements to read")
    tracemalloc.start()
    try:
        card_xlsx(hostile, "h.xlsx")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_a_zip_directory_of_many_entries_is_refused_before_it_is_read() -> None:
    entries = {f"x/{i}": b"" for i in range(100_000)}
    hostile = workbook(sheet(), **entries)  # type: ignore[arg-type]
    plain = plain_workbook(len(hostile))

    def refused() -> None:
        with pytest.raises(CardError, match="too many"):
            card_xlsx(hostile, "h.xlsx")

    assert ratio(refused, lambda: card_xlsx(plain, "p.xlsx")) < 5  # from its last bytes


def test_a_sheet_cut_short_is_refused_with_a_reason() -> None:
    with pytest.raises(CardError, match=r"Skipped h\.xlsx: it is not a readable workbook"):
        card_xlsx(workbook("<worksheet><sheetData><row"), "h.xlsx")


def test_cells_with_numbers_of_thousands_of_digits_are_carded() -> None:
    digits = "9" * 5000
    row = f'<c t="s"><v>{digits}</v></c><c s="{digits}"><v>1</v></c><c><v>x{digits}</v></c>'
    sheet_xml = f'<worksheet {MAIN}><sheetData><row r="1">{row}</row></sheetData></worksheet>'
    (card,) = card_xlsx(workbook(sheet_xml), "h.xlsx")
    assert card.columns_total == 3


def test_parquet_footer_of_millions_of_empty_structs() -> None:
    hostile = parquet(thrift_list_of_empty_structs(4 << 20))
    plain = parquet(thrift_list_of_empty_structs(0)[:-1] + b"\x15\x00" + b"\x00" * (4 << 20))

    def card(data: bytes) -> object:
        try:
            return card_parquet(data, "f.parquet")
        except CardError:
            return None

    assert ratio(lambda: card(hostile), lambda: card(plain)) < MAX_RATIO
    with pytest.raises(CardError, match="metadata"):
        card_parquet(hostile, "f.parquet")


@pytest.mark.parametrize(
    "footer",
    [
        thrift_nested_lists(100_000),  # lists in lists: deeper than any real footer
        b"\x25\x02\x00",  # a schema that is a number
        b"\x29\x25\x02\x02\x00",  # a schema of numbers
        b"\x29\x0c\x29\x1c\x15\x02\x00\x00",  # a row group whose columns are a number
    ],
    ids=["nested lists", "schema a number", "schema of numbers", "columns a number"],
)
def test_parquet_footer_of_the_wrong_shape_is_refused_with_a_reason(footer: bytes) -> None:
    with pytest.raises(CardError, match="Parquet metadata"):
        card_parquet(parquet(footer), "f.parquet")


async def _chunks(data: bytes, step: int = 65536) -> AsyncIterator[bytes]:
    for at in range(0, len(data), step):
        yield data[at : at + step]


async def _unpacked(data: bytes) -> int:
    return sum([len(c) async for c in gunzip(_chunks(data), "f.csv.gz")])


async def _seconds(data: bytes) -> float:
    start = time.perf_counter()
    with contextlib.suppress(CardError):
        await _unpacked(data)
    return time.perf_counter() - start


async def test_gzip_of_many_empty_members() -> None:
    hostile = gzip_members(1 << 16)  # 1.3 MB
    plain = gzip.compress(random.Random(0).randbytes(len(hostile)), mtime=0)  # as large
    plain_s = min(await _seconds(plain), await _seconds(plain))
    assert await _seconds(hostile) / max(plain_s, PLAIN_FLOOR_S) < MAX_RATIO
    with pytest.raises(CardError, match="gzip members"):
        await _unpacked(hostile)


async def test_gzip_of_a_few_members_is_unpacked_whole() -> None:
    members = gzip_members(100) + gzip.compress(plain_csv(1 << 20)) + gzip_members(100)
    assert await _unpacked(members) == len(plain_csv(1 << 20))


def test_json_nested_deeper_than_the_decoder_goes() -> None:
    card = profiled(b"[" * 200_000 + b"]" * 200_000, "json")()
    assert card.malformed.invalid == 1 and "Invalid JSON" in card.notes[0]
    card = profiled(b'{"a": 1}\n' + b"[" * 200_000 + b"\n" + b'{"a": 2}\n', "jsonl")()
    assert (card.rows, card.malformed.invalid) == (2, 1)


def test_json_array_of_tiny_values() -> None:
    hostile = b"[" + b"1," * (1 << 20) + b"1]"
    plain = plain_json(len(hostile))
    assert ratio(profiled(hostile, "json"), profiled(plain, "json")) < MAX_RATIO


def test_csv_header_of_millions_of_empty_fields() -> None:
    hostile = b"," * (4 << 20) + b"\n" + b"," * 100 + b"\n"
    plain = plain_csv(len(hostile))
    assert ratio(profiled(hostile), profiled(plain)) < MAX_RATIO
    card = profiled(hostile)()
    assert card.columns_total == (4 << 20) + 1 and card.malformed.ragged == 1


def test_csv_of_short_ragged_lines() -> None:
    hostile = b"a,b\n" + b"x\n" * (2 << 20)
    plain = plain_csv(len(hostile))
    assert ratio(profiled(hostile), profiled(plain)) < MAX_RATIO
    card = profiled(hostile)()
    assert card.malformed.ragged == 2 << 20
    assert [row for row, _ in card.malformed.first] == [2, 3, 4, 5, 6]


def test_parquet_of_very_many_row_groups_keeps_its_schema_and_rows() -> None:
    table = pa.table({"a": list(range(3000)), "b": [str(i) for i in range(3000)]})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=1)
    card = card_parquet(out.getvalue(), "many.parquet")
    assert (card.rows, [c.name for c in card.columns]) == (3000, ["a", "b"])
    assert card.notes[0] == "The metadata is too large: row groups and statistics unread."
