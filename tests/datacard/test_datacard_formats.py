"""Binary data files told by their bytes: .xlsx workbooks, Parquet, and what gets refused."""

from __future__ import annotations

import datetime
import decimal
import gzip
import io
import zipfile
from pathlib import Path

import openpyxl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bot.datacard.zipcheck as zipcheck
from bot.datacard import CardError
from bot.datacard.detect import HEAD_BYTES, TAIL_BYTES, detect
from bot.datacard.parquet import card_parquet
from bot.datacard.render import for_model, for_slack
from bot.datacard.xlsx import card_xlsx
from tests.support import DATA

POPULATION = DATA / "population_2000_2010_2020.csv"


def two_sheet_workbook() -> bytes:
    book = openpyxl.Workbook()
    people = book.active
    people.title = "Population"
    for line in POPULATION.read_text().splitlines():
        name, code, year, value = line.rsplit(",", 3)
        people.append(
            [name.strip('"'), code, *(int(x) if x.isdigit() else x for x in (year, value))]
        )
    sales = book.create_sheet("Sales")
    sales.append(["day", "region", "amount", "paid"])
    for i in range(30):
        day = datetime.date(2024, 1, 1) + datetime.timedelta(days=i)
        sales.append([day, ("north", "south")[i % 2], i * 1.5, i % 3 == 0])
    sales.append(["Total", None, "=SUM(C2:C31)", None])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_xlsx_two_sheets(tmp_path: Path) -> None:
    path = tmp_path / "book.xlsx"
    path.write_bytes(two_sheet_workbook())
    population, sales = card_xlsx(path, "book.xlsx")
    assert population.name == "book.xlsx [Population]" and population.kind == "xlsx"
    assert (population.rows, population.columns_total, population.header) == (795, 4, True)
    assert [c.name for c in population.columns] == ["Country Name", "Country Code", "Year", "Value"]
    assert [c.type for c in population.columns] == ["text", "text", "integer", "integer"]
    assert population.profiled_rows == 199 and population.profiled_from == "top"
    assert (sales.rows, sales.columns_total) == (31, 4)
    got = {c.name: c for c in sales.columns}
    assert [c.type for c in sales.columns] == ["date", "text", "decimal", "boolean"]
    assert (got["day"].low, got["day"].high) == ("2024-01-01", "2024-01-30")
    assert sales.aggregates is not None and sales.aggregates.examples == ["Total"]
    assert "*book.xlsx [Sales]* · Excel sheet · 31 rows × 4 columns" in for_slack(sales)


def _zip(entries: dict[str, bytes | str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            z.writestr(name, data)
    return out.getvalue()


MAIN = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
WORKBOOK = {
    "[Content_Types].xml": "<Types/>",
    "xl/workbook.xml": f'<workbook {MAIN} xmlns:r="{RELS}"><sheets>'
    '<sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>',
    "xl/_rels/workbook.xml.rels": '<Relationships xmlns="http://schemas.openxmlformats.org/'
    'package/2006/relationships"><Relationship Id="rId1" Target="worksheets/sheet1.xml" '
    f'Type="{RELS}/worksheet"/></Relationships>',
}


def test_hand_made_sheet_without_a_dimension_and_with_inline_strings() -> None:
    def text(ref: str, value: str) -> str:
        return f'<c r="{ref}" t="inlineStr"><is><t>{value}</t></is></c>'

    head = f'<row r="1">{text("A1", "name")}{text("B1", "n")}</row>'
    rows = "".join(
        f'<row r="{r}">{text(f"A{r}", f"n{r}")}<c r="B{r}"><v>{r}</v></c></row>'
        for r in range(2, 502)
    )
    sheet = f"<worksheet {MAIN}><sheetData>{head}{rows}</sheetData></worksheet>"
    (card,) = card_xlsx(_zip({**WORKBOOK, "xl/worksheets/sheet1.xml": sheet}), "hand.xlsx")
    assert (card.rows, card.columns_total, card.header) == (500, 2, True)
    assert [(c.name, c.type) for c in card.columns] == [("name", "text"), ("n", "integer")]


def test_zip_bomb_posing_as_xlsx_is_refused() -> None:
    bomb = _zip({**WORKBOOK, "xl/worksheets/sheet1.xml": b" " * (100 << 20)})
    assert len(bomb) < 1 << 20
    with pytest.raises(CardError, match=r"sheet1\.xml expands .* times .* zip bomb"):
        card_xlsx(bomb, "bomb.xlsx")


def test_workbook_over_the_total_size_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zipcheck, "MAX_TOTAL", 1000)
    with pytest.raises(CardError, match="would unpack to"):
        card_xlsx(two_sheet_workbook(), "big.xlsx")


def test_zip_that_is_not_a_workbook_is_refused() -> None:
    with pytest.raises(CardError, match=r"without \[Content_Types\]\.xml, not an Excel workbook"):
        card_xlsx(_zip({"data.csv": "a,b\n1,2\n"}), "data.xlsx")
    with pytest.raises(CardError, match="not a readable zip"):
        card_xlsx(b"PK\x03\x04 not really", "broken.xlsx")


def parquet_bytes() -> bytes:
    table = pa.table(
        {
            "country": ["World", "Chad", None, "Peru"],
            "year": pa.array([2000, 2010, 2020, None], pa.int32()),
            "pop": [7.8e9, 1.6e7, 3.3e7, 2.0e6],
            "day": [datetime.date(2020, 1, 1), datetime.date(2021, 5, 6), None, None],
            "ts": pa.array(
                [datetime.datetime(2020, 1, 1, 12), None, None, None], pa.timestamp("ms")
            ),
            "price": pa.array([decimal.Decimal("1.25"), None, None, None], pa.decimal128(10, 2)),
            "tags": [["a"], [], None, ["b", "c"]],
            "meta": [{"x": 1}, None, None, {"x": 2}],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=2)
    return out.getvalue()


def test_parquet_from_its_footer(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(parquet_bytes())
    card = card_parquet(path, "t.parquet")
    assert (card.kind, card.rows, card.columns_total) == ("parquet", 4, 8)
    got = {c.name: c for c in card.columns}
    assert {n: c.type for n, c in got.items()} == {
        "country": "text",
        "year": "integer",
        "pop": "decimal",
        "day": "date",
        "ts": "datetime",
        "price": "decimal",
        "tags": "array",
        "meta": "object",
    }
    assert got["ts"].declared == "INT64 TIMESTAMP_MILLIS" and got["country"].empty == 1
    assert (got["year"].low, got["year"].high, got["year"].empty) == (2000, 2020, 1)
    assert (got["day"].low, got["day"].high) == ("2020-01-01", "2021-05-06")
    assert got["ts"].low == "2020-01-01 12:00:00"
    assert "2 row groups" in card.notes[0] and "from the file's own statistics" in for_model(card)
    assert card_parquet(path.read_bytes(), "t.parquet") == card


@pytest.mark.parametrize("cut", [b"", b"PAR1", b"PAR1xxxxPAR1"])
def test_parquet_that_is_not_whole_is_refused(cut: bytes) -> None:
    with pytest.raises(CardError, match="not a whole Parquet file"):
        card_parquet(cut, "cut.parquet")


def test_parquet_with_garbage_metadata_is_refused() -> None:
    data = parquet_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    broken = (
        data[: -8 - length] + b"\x19\xff" * (length // 2) + data[-8 - length + length // 2 * 2 :]
    )
    with pytest.raises(CardError, match="metadata is malformed"):
        card_parquet(broken, "broken.parquet")


def ends(data: bytes) -> tuple[bytes, bytes]:
    return data[:HEAD_BYTES], data[-TAIL_BYTES:]


@pytest.mark.parametrize(
    ("data", "name", "kind"),
    [
        (b"a,b\n1,2\n", "x.txt", "csv"),
        (b"a\tb\n1\t2\n", "x.tsv", "tsv"),
        ("a,b\n1,2\n".encode("utf-16"), "x.csv", "csv"),
        (b'[{"a": 1}]', "x", "json"),
        (b'{"a": 1}\n{"a": 2}\n', "x", "jsonl"),
        (gzip.compress(b"a,b\n", mtime=0), "x.csv.gz", "gzip"),
    ],
)
def test_detect_text_and_gzip(data: bytes, name: str, kind: str) -> None:
    assert detect(*ends(data), name) == kind
    assert detect(data[:HEAD_BYTES], None, name) == kind


def test_detect_binary_kinds_by_bytes_not_names() -> None:
    assert detect(*ends(two_sheet_workbook()), "report.csv") == "xlsx"
    assert detect(two_sheet_workbook()[:HEAD_BYTES], None, "report") == "xlsx"
    assert detect(*ends(parquet_bytes()), "data.csv") == "parquet"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (_zip({"word/document.xml": "<w/>", "[Content_Types].xml": "<T/>"}), "a Word document"),
        (_zip({"notes.txt": "hi"}), "a zip archive, not an Excel workbook"),
        (b"%PDF-1.7\n...", "a PDF"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), "old Office file"),
        (b"<!DOCTYPE html><html><body>Sign in</body></html>", "a web page"),
        (b"a,b\n1,\x00\x00\x00\n", "binary"),
        (b"PAR1" + bytes(100), "does not end like it"),
    ],
)
def test_detect_refuses_with_the_reason(data: bytes, why: str) -> None:
    with pytest.raises(CardError, match=why):
        detect(*ends(data), "upload.csv")
