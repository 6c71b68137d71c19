"""Tables as data: the GFM pipe tables in an answer's Markdown, a CSV the analysis wrote,
and their plain forms (CSV bytes, aligned monospace text). Numbers in cells are read the
way people write them ("$1.2k", "(1,234)", "4.7%") so a view can sort and align them."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

CAPTION_MAX = 150
CSV_CELL_MAX = 1000  # a CSV's cell, kept (the analysis may write anything)
CSV_COLUMNS_MAX = 100
MONO_CELL_MAX = 60  # one cell's width in monospace text
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # kept: tab and line break (CSV quoting)


@dataclass(frozen=True)
class Table:
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    total_rows: int  # ≥ len(rows): a big CSV keeps only its first rows


# --- numbers -------------------------------------------------------------------------------

_SPACES = " \u00a0\u2009\u202f"  # thousands separators: space, nbsp, thin, narrow nbsp
_BODY = re.compile(
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # 1,402,617,695.5
    rf"|\d{{1,3}}(?:[{_SPACES}]\d{{3}})+(?:\.\d+)?"  # 1 234 567
    r"|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"  # 1402617695, 3.2, 1e6
    r"|\.\d+"  # .5
)
_SCALES = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9, "T": 1e12}
_CURRENCY = "$€£¥₹"
_WRAPPERS = ("**", "__", "`", "*")


def parse_number(text: str) -> float | None:
    """The value of a cell written as a number, else None (dates, versions, words)."""
    s = _unwrap(text.strip())
    negative = False
    if len(s) > 2 and s[0] == "(" and s[-1] == ")":  # accounting negative
        negative, s = True, s[1:-1].strip()
    if s[:1] in "-−+" and s:
        negative, s = negative or s[0] != "+", s[1:].lstrip()
    if s[:1] and s[0] in _CURRENCY:
        s = s[1:].lstrip()
    if s.endswith("%"):
        s = s[:-1].rstrip()
    scale = 1.0
    for suffix, factor in _SCALES.items():
        if s.endswith(suffix) and len(s) > len(suffix) and s[-len(suffix) - 1] not in "eE":
            s, scale = s[: -len(suffix)].rstrip(), factor
            break
    if not _BODY.fullmatch(s):
        return None
    value = float(re.sub(rf"[,{_SPACES}]", "", s)) * scale
    if not math.isfinite(value):  # 1e999
        return None
    return -value if negative else value


def _unwrap(s: str) -> str:
    """`**12**` and `` `12` `` are 12."""
    changed = True
    while changed:
        changed = False
        for mark in _WRAPPERS:
            if len(s) > 2 * len(mark) and s.startswith(mark) and s.endswith(mark):
                s, changed = s[len(mark) : -len(mark)].strip(), True
    return s


def number_columns(table: Table) -> tuple[bool, ...]:
    """Per column: every non-empty body cell is a number (and at least one is)."""
    result = []
    for col in range(len(table.header)):
        cells = [row[col].strip() for row in table.rows if col < len(row) and row[col].strip()]
        result.append(bool(cells) and all(parse_number(c) is not None for c in cells))
    return tuple(result)


# --- Markdown tables -----------------------------------------------------------------------

_FENCE = re.compile(r" {0,3}(```|~~~)")
_DELIMITER_CELL = re.compile(r":?-+:?")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_STRONG = re.compile(r"\*\*(.+?)\*\*|(?<!\w)__(.+?)__(?!\w)")  # not snake__case
_EMPH = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_STRIKE = re.compile(r"~~(.+?)~~")
_CODE = re.compile(r"`+([^`]*)`+")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_KEPT = re.compile("\x00(\\d+)\x00")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~<>])")


def find_tables(markdown: str) -> list[tuple[int, int, Table]]:
    """Every GFM table with at least one body row, as (start, end, table): the span covers
    its lines (without the last line break). Tables inside fenced code are left alone."""
    lines = _lines(markdown)
    found: list[tuple[int, int, Table]] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        start, text = lines[i]
        if match := _FENCE.match(text):
            mark = match.group(1)
            fence = None if fence and text.strip().startswith(fence) else (fence or mark)
            i += 1
            continue
        if fence is None and i + 1 < len(lines) and _is_table_start(text, lines[i + 1][1]):
            header = _split_row(text)
            end = i + 2
            while end < len(lines) and "|" in lines[end][1] and lines[end][1].strip():
                end += 1
            rows = tuple(_fit(_split_row(line), len(header)) for _, line in lines[i + 2 : end])
            if rows:
                caption = _caption(lines, i) or f"Table {len(found) + 1}"
                table = Table(caption, tuple(header), rows, len(rows))
                last_start, last_text = lines[end - 1]
                found.append((start, last_start + len(last_text), table))
                i = end
                continue
        i += 1
    return found


def without_tables(
    markdown: str, spans: list[tuple[int, int, Table]], pointer: Callable[[int, Table], str]
) -> str:
    """The text with each table's span replaced by `pointer(index, table)`."""
    parts, at = [], 0
    for index, (start, end, table) in enumerate(sorted(spans, key=lambda s: s[0])):
        parts += [markdown[at:start], pointer(index, table)]
        at = end
    parts.append(markdown[at:])
    return "".join(parts)


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its line break) for each line."""
    result, at = [], 0
    for line in text.splitlines(keepends=True):
        result.append((at, line.rstrip("\r\n")))
        at += len(line)
    return result


def _is_table_start(header: str, delimiter: str) -> bool:
    if "|" not in header or "|" not in delimiter:
        return False
    cells = _split_row(delimiter, unformat=False)
    if not cells or not all(_DELIMITER_CELL.fullmatch(c.strip()) for c in cells):
        return False
    return len(cells) == len(_split_row(header, unformat=False))


def _split_row(line: str, *, unformat: bool = True) -> list[str]:
    """Cells of `| a | b \\| c |`: outer pipes optional, `\\|` is a pipe inside a cell."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    cells = [c.replace("\\|", "|") for c in re.split(r"(?<!\\)\|", s)]
    return [_display(c) if unformat else c.strip() for c in cells]


def _display(cell: str) -> str:
    """A cell's text as shown: without emphasis marks, code ticks and link targets."""
    kept: list[str] = []  # code spans and escaped characters, set aside meanwhile

    def keep(text: str) -> str:
        kept.append(text)
        return f"\x00{len(kept) - 1}\x00"

    s = _BREAK.sub(" ", cell.replace("\x00", ""))
    s = _CODE.sub(lambda m: keep(m.group(1)), s)
    s = _ESCAPE.sub(lambda m: keep(m.group(1)), s)
    s = _LINK.sub(r"\1", s)
    s = _STRONG.sub(lambda m: m.group(1) or m.group(2), s)
    s = _STRIKE.sub(r"\1", s)
    s = _EMPH.sub(r"\1", s)
    return _KEPT.sub(lambda m: kept[int(m.group(1))], s).strip()


def _fit(cells: list[str], width: int) -> tuple[str, ...]:
    """A ragged row padded or cut to the header's width."""
    return tuple((cells + [""] * width)[:width])


def _caption(lines: list[tuple[int, str]], header_index: int) -> str | None:
    """The nearest non-blank line above the table, if it is a heading or ends with ':'."""
    for _, text in reversed(lines[:header_index]):
        line = text.strip()
        if not line:
            continue
        if not (line.startswith("#") or line.rstrip("*_ ").endswith(":")):  # **Totals:**
            return None
        caption = _display(line.lstrip("#").strip("*_ ").rstrip(":"))
        caption = caption.strip("*_ ").rstrip(":").strip()
        if not caption:
            return None
        return caption if len(caption) <= CAPTION_MAX else caption[: CAPTION_MAX - 1] + "…"
    return None


# --- CSV -----------------------------------------------------------------------------------


def table_from_csv(data: bytes, caption: str, max_rows: int = 100) -> Table | None:
    """A CSV's first `max_rows` rows (all counted), or None when it is not a table with a
    header and at least one data row. The bytes may be anything."""
    text = _decode(data)
    first = text[: text.find("\n")] if "\n" in text else text
    delimiter = max((",", ";", "\t"), key=first.count)  # ties: comma
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: tuple[str, ...] | None = None
    rows: list[tuple[str, ...]] = []
    total = 0
    try:
        for record in reader:
            if not any(cell.strip() for cell in record):
                continue
            cells = [_csv_cell(cell) for cell in record[:CSV_COLUMNS_MAX]]
            if header is None:
                header = tuple(cells)
                continue
            total += 1
            if len(rows) < max_rows:
                rows.append(_fit(cells, len(header)))
    except csv.Error:  # a field over csv's size limit, or a broken quote at the end
        return None
    if not header or not rows:
        return None
    return Table(caption, header, tuple(rows), total)


def _decode(data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _csv_cell(cell: str) -> str:
    cell = _CONTROL.sub(" ", cell).strip()
    return cell if len(cell) <= CSV_CELL_MAX else cell[: CSV_CELL_MAX - 1] + "…"


def to_csv(table: Table) -> bytes:
    """The whole table as UTF-8 CSV, header first."""
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(table.header)
    writer.writerows(table.rows)
    return out.getvalue().encode("utf-8")


# --- monospace -----------------------------------------------------------------------------


def monospace(table: Table, max_chars: int) -> tuple[str, int]:
    """Aligned columns (numbers to the right), the header underlined with '-': as many rows
    as fit in `max_chars`. Returns (text, rows shown)."""
    header = [_mono_cell(c) for c in table.header]
    rows = [[_mono_cell(c) for c in _fit(list(row), len(header))] for row in table.rows]
    right = number_columns(table)
    # The text only grows with each row shown, so search for the most that fit.
    low, high = 0, len(rows)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_aligned(header, rows[:middle], right)) <= max_chars:
            low = middle
        else:
            high = middle - 1
    text = _aligned(header, rows[:low], right)
    if len(text) > max_chars:  # not even the header fits
        text = text[: max_chars - 1] + "…" if max_chars > 0 else ""
    return text, low


def _mono_cell(cell: str) -> str:
    cell = " ".join(cell.split())  # no line breaks or tabs inside a column
    return cell if len(cell) <= MONO_CELL_MAX else cell[: MONO_CELL_MAX - 1] + "…"


def _aligned(header: list[str], rows: list[list[str]], right: tuple[bool, ...]) -> str:
    widths = [max([1, len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    underline = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), underline, *(line(r) for r in rows)])
