"""Cell values of an .xlsx sheet: shared strings, inline strings, booleans, errors, and
numbers that a date format turns into dates."""

from __future__ import annotations

import re
import zipfile
from datetime import datetime, timedelta
from typing import Any
from xml.etree.ElementTree import Element, iterparse

from bot.datacard.zipcheck import read_part

M = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
MAX_STRINGS = 200_000  # shared strings read, at most, to name and sample the first rows
_DATE_FORMATS = {*range(14, 23), *range(27, 37), *range(45, 48), *range(50, 59)}
_LITERAL = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.')
_CELL = re.compile(r"([A-Z]+)(\d+)")


def column_index(ref: str) -> int:
    """0 for A, 25 for Z, 26 for AA."""
    index = 0
    for letter in ref:
        index = index * 26 + ord(letter) - 64
    return index - 1


def split_ref(ref: str) -> tuple[int, int] | None:
    """(column index, row number) of a cell reference such as C12."""
    m = _CELL.fullmatch(ref.upper())
    return (column_index(m.group(1)), int(m.group(2))) if m else None


class SharedStrings:
    """The workbook's shared strings, read only as far as the cells asked for need."""

    def __init__(self, book: zipfile.ZipFile, what: str) -> None:
        self.strings: list[str] = []
        name = "xl/sharedStrings.xml"
        self._events = iterparse(read_part(book, name, what)) if name in book.NameToInfo else None

    def get(self, index: int) -> str:
        while self._events is not None and len(self.strings) <= min(index, MAX_STRINGS):
            try:
                _, elem = next(self._events)
            except StopIteration:
                self._events = None
                break
            if elem.tag == M + "si":
                self.strings.append("".join(t.text or "" for t in elem.iter(M + "t")))
                elem.clear()
        return self.strings[index] if index < len(self.strings) else ""


def date_styles(book: zipfile.ZipFile, what: str) -> set[int]:
    """Indexes of the cell styles whose number format shows a date or a time."""
    if "xl/styles.xml" not in book.NameToInfo:
        return set()
    custom: dict[int, str] = {}
    styles: list[int] = []
    in_xfs = False
    for event, elem in iterparse(read_part(book, "xl/styles.xml", what), ("start", "end")):
        if elem.tag == M + "cellXfs":
            in_xfs = event == "start"
        elif event == "end" and elem.tag == M + "numFmt":
            custom[int(elem.get("numFmtId", "0"))] = elem.get("formatCode", "")
        elif event == "end" and elem.tag == M + "xf" and in_xfs:
            styles.append(int(elem.get("numFmtId", "0")))
    return {i for i, fmt in enumerate(styles) if _is_date(fmt, custom.get(fmt))}


def _is_date(fmt: int, code: str | None) -> bool:
    if code is None:
        return fmt in _DATE_FORMATS
    plain = _LITERAL.sub("", code).lower()
    return any(c in plain for c in "dy") or bool(re.search(r"h|mm:ss|m:ss", plain))


def cell_value(cell: Element, strings: SharedStrings, dates: set[int], epoch: datetime) -> Any:
    """The value of a <c> element as Python: str, float, int, bool, an ISO date, or None."""
    kind = cell.get("t", "n")
    if kind == "inlineStr":
        return "".join(t.text or "" for t in cell.iter(M + "t"))
    v = cell.find(M + "v")
    text = v.text if v is not None else None
    if text is None:
        return None
    if kind == "s":
        return strings.get(int(text))
    if kind == "b":
        return text == "1"
    if kind in ("str", "e", "d"):
        return text
    number = float(text)
    if int(cell.get("s", "0")) in dates and 0 <= number < 2_958_466:  # up to 9999-12-31
        moment = epoch + timedelta(days=number)
        return moment.strftime("%Y-%m-%d" if number == int(number) else "%Y-%m-%d %H:%M:%S")
    return int(number) if number.is_integer() and abs(number) < 2**53 else number
