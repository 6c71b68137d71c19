"""The table of kinds: each kind told by its bytes whatever its name, refusals with their
reason, and gzip unpacked to the kind inside it."""

from __future__ import annotations

import gzip
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.datacard import CardError
from bot.datacard.detect import HEAD_BYTES, TAIL_BYTES, detect
from bot.datacard.kinds import KINDS, claimed, kind, takes, unpacked_name
from bot.errors import BotError
from bot.sessions.intake import prepare
from tests.datacard.test_datacard_formats import parquet_bytes, two_sheet_workbook
from tests.fakes.anthropic.api import FakeAnthropic, Reply, text
from tests.support import runtime_on

CSV = b"country,year,pop\nChad,2010,16000000\nPeru,2020,33000000\n"
TSV = b"country\tyear\nChad\t2010\n"


def ends(data: bytes) -> tuple[bytes, bytes]:
    return data[:HEAD_BYTES], data[-TAIL_BYTES:]


@pytest.mark.parametrize(
    ("data", "name", "expected"),
    [
        (CSV, "data.txt", "csv"),
        (CSV, "export", "csv"),  # no extension at all
        (CSV, "data.xlsx", "csv"),
        (CSV, "data.parquet", "csv"),
        (TSV, "rows.tsv", "tsv"),  # the name breaks the CSV/TSV tie, nothing more
        (b'[{"a": 1}]', "data.csv", "json"),
        (b'{"a": 1}\n{"a": 2}\n', "rows", "jsonl"),
        (two_sheet_workbook(), "report.parquet", "xlsx"),
        (two_sheet_workbook(), "report", "xlsx"),
        (parquet_bytes(), "table.xlsx", "parquet"),
        (parquet_bytes(), "table", "parquet"),
        (gzip.compress(CSV, mtime=0), "data.csv", "gzip"),
        (gzip.compress(CSV, mtime=0), "download", "gzip"),
    ],
)
def test_each_kind_is_told_by_its_bytes_not_its_name(data: bytes, name: str, expected: str) -> None:
    assert detect(*ends(data), name) == expected
    assert detect(data[:HEAD_BYTES], None, name) == expected  # a stream: no tail at hand


@pytest.mark.parametrize(
    ("data", "name", "why"),
    [
        (b"\x89PNG\r\n\x1a\n" + bytes(64), "data.csv", "it is a PNG image, not a data file"),
        (b"%PDF-1.7\n", "report", "it is a PDF, not a data file"),
        (b"BZh91AY&SY", "rows.tsv", "it is bzip2-compressed"),
        (b"\x7fELF\x02\x01", "data.json", "it is a program"),
    ],
)
def test_a_refused_kind_is_told_by_its_bytes_and_says_what_is_taken(
    data: bytes, name: str, why: str
) -> None:
    with pytest.raises(CardError, match=re.escape(f"Skipped {name}: {why}")) as refusal:
        detect(*ends(data), name)
    assert "I take CSV, TSV, JSON, JSON Lines, Excel (.xlsx) and Parquet files" in str(
        refusal.value
    )


def test_a_name_promising_json_must_hold_json() -> None:
    with pytest.raises(CardError, match=r"notes\.json: it does not start like JSON"):
        detect(b"just some notes\n", None, "notes.json")
    assert detect(b"just some notes\n", None, "notes.txt") == "csv"


def test_the_table_has_one_row_per_kind_with_its_extensions() -> None:
    names = [k.name for k in KINDS]
    assert names == ["csv", "tsv", "json", "jsonl", "xlsx", "parquet", "gzip"]
    assert all(k.extensions and all(e.startswith(".") for e in k.extensions) for k in KINDS)
    assert [claimed(f"x{k.extensions[0].upper()}") for k in KINDS] == list(KINDS)
    assert claimed("export") is None
    assert {k.name for k in KINDS if k.intake == "spool"} == {"xlsx", "parquet"}
    assert [k.name for k in KINDS if k.intake == "unpack"] == ["gzip"]
    assert kind("xlsx").label in takes() and kind("gzip").label not in takes().split(", ")


def test_an_unpacked_name_loses_only_a_gzip_extension() -> None:
    assert unpacked_name("pop.csv.GZ") == "pop.csv"
    assert unpacked_name("pop.tsv.gzip") == "pop.tsv"
    assert unpacked_name("pop.csv") == "pop.csv"


async def chunks_of(data: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def read_all(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


@pytest.mark.parametrize(
    ("name", "saved", "expected"),
    [
        ("pop.csv.gz", "pop.csv", "csv"),
        ("pop.csv", "pop.csv", "csv"),  # gzip under a plain name is still unpacked
        ("rows.tsv.gz", "rows.tsv", "tsv"),
        ("download", "download", "csv"),
    ],
)
async def test_gzip_is_unpacked_to_the_kind_inside(name: str, saved: str, expected: str) -> None:
    data = TSV if expected == "tsv" else CSV
    prepared = await prepare(name, chunks_of(gzip.compress(data)))
    assert (prepared.name, prepared.kind, prepared.spooled) == (saved, expected, False)
    assert await read_all(prepared.chunks) == data


async def test_gzip_of_a_binary_kind_is_refused_with_its_label() -> None:
    with pytest.raises(CardError, match=r"t\.parquet\.gz: it holds Parquet data; send CSV or TSV"):
        await prepare("t.parquet.gz", chunks_of(gzip.compress(parquet_bytes())))


async def test_a_gzip_bomb_under_a_plain_name_is_called_gzip() -> None:
    prepared = await prepare("bomb.csv", chunks_of(gzip.compress(b"0" * (20 << 20)), 1 << 16))
    with pytest.raises(CardError, match=r"bomb\.csv: it is gzip-compressed and expands more"):
        await read_all(prepared.chunks)


async def test_a_workbook_without_its_extension_is_spooled_as_one() -> None:
    data = two_sheet_workbook()
    prepared = await prepare("report", chunks_of(data))
    assert (prepared.name, prepared.kind, prepared.spooled) == ("report", "xlsx", True)
    assert await read_all(prepared.chunks) == data


async def test_a_refused_file_makes_no_sandbox(sandbox_root: Path) -> None:
    """Its first bytes refuse it before a (billed) sandbox is asked for."""
    async with (
        FakeAnthropic(lambda req: Reply([text("ok")])) as model,
        runtime_on("local", model.base_url, sandbox_root) as runtime,
    ):
        session = runtime.sessions.new("refused")
        try:
            png = b"\x89PNG\r\n\x1a\n" + bytes(100)
            with pytest.raises(BotError, match="a PNG image"):
                await session.add_file("chart.csv", lambda: chunks_of(png))
            made = await session.sandbox_if_ready()  # waits for one, were it started
        finally:
            await session.close()
    assert made is None
