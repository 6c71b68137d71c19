"""Cell values of an .xlsx sheet: shared strings, inline strings, booleans, errors, and
numbers that a date format turns into dates."""

from __future__ import annotations

import re
import zipfile
from datetime import datetime, timedelta
from typing import Any
from xml.etree.ElementTree import Element, iterparse

from bot.datacard.budget import check
from bot.datacard.zipcheck import read_part

M = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
MAX_STRINGS = 200_000  # shared strings read, at most, to name and sample the first rows
# Excel's own limits: 64,000 cell styles, format codes of 255 characters, a few hundred
# custom formats. A styles part past them is hostile: the rest of it is not read.
MAX_STYLES = 64_000
MAX_FORMATS = 1_000
FORMAT_CHARS = 255
_DATE_FORMATS = {*range(14, 23), *range(27, 37), *range(45, 48), *range(50, 59)}
_LITERAL = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.')
_CELL = re.compile(r"([A-Z]{1,3})(\d{1,7})")  # up to XFD1048576, Excel's last cell
_ID = re.compile(r"\d{1,9}")


def column_index(ref: str) -> int:
    """0 for A, 25 for Z, 26 for AA."""
    index = 0
    for letter in ref:
        index = index * 26 + ord(letter) - 64
    return index - 1


def split_ref(ref: str) -> tuple[int, int] | None:
    """(column index, row number) of a cell reference such as C12."""
    m = _CELL.fullmatch(ref.upper()) if len(ref) <= 10 else None
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
                check()
                self.strings.append("".join(t.text or "" for t in elem.iter(M + "t")))
                elem.clear()
        return self.strings[index] if index < len(self.strings) else ""


def date_styles(book: zipfile.ZipFile, what: str) -> set[int]:
    """Indexes of the cell styles whose number format shows a date or a time. Each format
    is looked at once, however many styles use it."""
    if "xl/styles.xml" not in book.NameToInfo:
        return set()
    dated = {fmt: True for fmt in _DATE_FORMATS}
    dates, styles, formats = set(), 0, 0
    in_xfs = False
    for event, elem in iterparse(read_part(book, "xl/styles.xml", what), ("start", "end")):
        if elem.tag == M + "cellXfs":
            in_xfs = event == "start"
        elif event != "end":
            continue
        elif elem.tag == M + "numFmt":
            formats += 1
            dated[_id(elem)] = _is_date(elem.get("formatCode", "")[:FORMAT_CHARS])
        elif elem.tag == M + "xf" and in_xfs:
            if dated.get(_id(elem), False):
                dates.add(styles)
            styles += 1
        if styles >= MAX_STYLES or formats >= MAX_FORMATS:
            break  # more than Excel makes: the rest is not read
        if not (styles + formats) % 1024:
            check()
        elem.clear()
    return dates


def _id(elem: Element) -> int:
    return _index(elem.get("numFmtId", "0"))


def _index(text: str) -> int:
    """A style or format number; -1 for anything else (no int() of a million digits)."""
    return int(text) if _ID.fullmatch(text) else -1


def _is_date(code: str) -> bool:
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
        return strings.get(int(text)) if _ID.fullmatch(text) else ""
    if kind == "b":
        return text == "1"
    if kind in ("str", "e", "d"):
        return text
    try:
        number = float(text)
    except ValueError:
        return text[:FORMAT_CHARS]
    if _index(cell.get("s", "0")) in dates and 0 <= number < 2_958_466:  # up to 9999-12-31
        moment = epoch + timedelta(days=number)
        return moment.strftime("%Y-%m-%d" if number == int(number) else "%Y-%m-%d %H:%M:%S")
    return int(number) if number.is_integer() and abs(number) < 2**53 else number
