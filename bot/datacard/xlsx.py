"""Cards for .xlsx workbooks, one per sheet, from the zip's own parts with the standard
library: sheet names (workbook.xml and its relationships), each sheet's size (its
<dimension>, else its last row), and its first rows for the header and column types."""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any
from xml.etree.ElementTree import ParseError, iterparse

from bot.datacard.budget import check
from bot.datacard.card import DataCard
from bot.datacard.columns import ColumnProfile
from bot.datacard.csvprof import DETAIL, LABEL_COLUMNS, aggregates
from bot.datacard.errors import CardError
from bot.datacard.sniff import has_header
from bot.datacard.xlsxcells import M, SharedStrings, cell_value, date_styles, split_ref
from bot.datacard.zipcheck import Source, open_zip, read_part

SAMPLE_ROWS = 200  # rows read from the top of each sheet
MAX_SHEETS = 50
# XML elements read from all the sheets of a workbook (a cell and its value are two): the
# first rows of a few wide sheets. Past this many, a row of a million cells is not read on.
MAX_ELEMENTS = 100_000
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
# A row's number, among its first attributes (writers put r first): a short look after
# each "<row", so that many of them with no ">" cost no more than other bytes.
_ROW = re.compile(rb'<(?:\w{1,32}:)?row\s[^>]{0,40}?\br="(\d{1,7})"')


def card_xlsx(source: Source, name: str) -> list[DataCard]:
    """A card per worksheet of the workbook at `source` (a path, or the file's bytes).
    Raises CardError for an archive that is not a workbook or would unpack too much."""
    required = ("[Content_Types].xml", "xl/workbook.xml")
    with open_zip(source, name, required) as book:
        try:
            return _cards(book, name)
        except (ParseError, ValueError, zipfile.BadZipFile, zlib.error, EOFError) as error:
            why = f"it is not a readable workbook ({str(error)[:200]})"
            raise CardError(f"Skipped {name}: {why}.") from None


@dataclass
class _Reading:
    """What reading the sheets of one workbook shares."""

    strings: SharedStrings
    dates: set[int]
    epoch: datetime
    elements: int = MAX_ELEMENTS  # XML elements left to read, in all sheets


def _cards(book: zipfile.ZipFile, name: str) -> list[DataCard]:
    sheets, epoch = _sheets(book, name)
    reading = _Reading(SharedStrings(book, name), date_styles(book, name), epoch)
    cards = []
    for title, part in sheets[:MAX_SHEETS]:
        if part not in book.NameToInfo:
            raise CardError(f"Skipped {name}: its sheet {title} is missing.")
        cards.append(_sheet(book, name, title, part, reading))
    if len(sheets) > MAX_SHEETS:
        cards[-1].notes.append(f"The workbook has {len(sheets)} sheets; the first 50 shown.")
    return cards


def _sheets(book: zipfile.ZipFile, name: str) -> tuple[list[tuple[str, str]], datetime]:
    targets = {}
    if "xl/_rels/workbook.xml.rels" in book.NameToInfo:
        for _, rel in iterparse(read_part(book, "xl/_rels/workbook.xml.rels", name)):
            if rel.tag == REL + "Relationship" and rel.get("Type", "").endswith("/worksheet"):
                target = rel.get("Target", "")
                path = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
                targets[rel.get("Id")] = str(PurePosixPath(path))
    sheets, epoch = [], datetime(1899, 12, 30)
    for _, elem in iterparse(read_part(book, "xl/workbook.xml", name)):
        if elem.tag == M + "workbookPr" and elem.get("date1904") in ("1", "true"):
            epoch = datetime(1904, 1, 1)
        if elem.tag == M + "sheet" and elem.get(R + "id") in targets:
            sheets.append((elem.get("name", "?"), targets[elem.get(R + "id")]))
    return sheets, epoch


def _sheet(book: zipfile.ZipFile, name: str, title: str, part: str, reading: _Reading) -> DataCard:
    dimension, rows, cut = _top(book, part, name, reading)
    if dimension is None:
        dimension = (0, max((len(r) for r in rows), default=0), _last_row(book, part, name))
    first, width, height = dimension
    rows = [row[first:] for row in rows]
    whole = not cut and len(rows) < SAMPLE_ROWS  # read to the end: what it holds, whatever it says
    if whole:
        height = len(rows)
    texts = [["" if v is None else str(v) for v in row] for row in rows[:50]]
    header = has_header(texts) if height > 1 else bool(rows)
    names = [
        str(v) if v not in (None, "") else f"column {j + 1}"
        for j, v in enumerate(rows[0] if rows else [])
    ]
    names = (names if header and rows else [])[:DETAIL]
    names += [f"column {j + 1}" for j in range(len(names), min(width, DETAIL))]
    profiles = [ColumnProfile(n, j < LABEL_COLUMNS) for j, n in enumerate(names)]
    body = rows[1:] if header else rows
    for j, profile in enumerate(profiles):
        profile.add_values([row[j] if j < len(row) else None for row in body])
    card = DataCard(f"{name} [{title}]", "xlsx", header=header, columns_total=width)
    card.rows = max(0, height - (1 if header else 0))
    card.columns = [p.card() for p in profiles]
    card.profiled_rows, card.aggregates = len(body), aggregates(profiles)
    card.profiled_from = "top"
    if not whole:
        card.notes.append("Rows and columns as the sheet records its size.")
    if cut:
        card.notes.append(
            f"Too many XML elements to read: profiled from its first {len(rows)} rows."
        )
    return card


def _top(
    book: zipfile.ZipFile, part: str, name: str, reading: _Reading
) -> tuple[tuple[int, int, int] | None, list[list[Any]], bool]:
    """The sheet's dimension (first column, columns, rows) if it records one, its first
    rows, and whether the workbook's element budget cut them short. Each element read is
    dropped from the tree (a cell once its value is taken): memory stays flat."""
    dimension = None
    rows: list[list[Any]] = []
    row: list[Any] | None = None
    path: list[Any] = []  # the elements open, outermost first
    in_cell = 0
    for event, elem in _events(book, part, name):
        if event == "start":
            path.append(elem)
            in_cell += elem.tag == M + "c"
            if elem.tag == M + "dimension":
                dimension = _size(elem.get("ref", ""))
            elif elem.tag == M + "row":
                row = []
            continue
        reading.elements -= 1
        if reading.elements < 0:
            return dimension, rows, True
        path.pop()
        if elem.tag == M + "c":
            in_cell -= 1
            if row is not None:
                _add_cell(row, elem, reading)
        elif elem.tag == M + "row" and row is not None:
            rows.append(row)
            row = None
            check()
            if len(rows) >= SAMPLE_ROWS:
                break
        if path and not in_cell:
            path[-1].remove(elem)  # the only child left: those before it are gone
    return dimension, rows, False


def _add_cell(row: list[Any], cell: Any, reading: _Reading) -> None:
    at = split_ref(cell.get("r", "")) if cell.get("r") else None
    column = at[0] if at else len(row)
    if column < DETAIL:
        row += [None] * (column - len(row))
        row.append(cell_value(cell, reading.strings, reading.dates, reading.epoch))


def _events(book: zipfile.ZipFile, part: str, name: str) -> Iterator[tuple[str, Any]]:
    return iterparse(read_part(book, part, name), ("start", "end"))


def _size(ref: str) -> tuple[int, int, int] | None:
    """(first column, columns, rows) of a range such as A1:D796."""
    corners = [split_ref(p) for p in ref.split(":")]
    if None in corners:
        return None
    # no None left among them (checked above); the checker cannot narrow a list's items
    (c1, r1), (c2, r2) = corners[0], corners[-1]  # type: ignore[misc]
    return c1, c2 - c1 + 1, r2 - r1 + 1


def _last_row(book: zipfile.ZipFile, part: str, name: str) -> int:
    """The last row number, from the raw XML (for a sheet that does not record its size)."""
    last, tail = 0, b""
    with book.open(part) as raw:
        while chunk := raw.read(1 << 20):
            found = _ROW.findall(tail + chunk)
            last = max([last, *map(int, found)])
            tail = chunk[-100:]
            check()
    return last
