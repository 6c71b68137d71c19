"""Guesses made once, on the first bytes of a text file: encoding, delimiter, header row."""

from __future__ import annotations

import codecs
import re
from collections import Counter

from bot.datacard.values import MISSING, date_keys, number

DELIMITERS = (",", "\t", ";", "|")
HEADER_COLUMNS = 1000  # columns that vote on a header row: enough, and no cost per column
_QUOTED = re.compile(r'"[^"]*(?:""[^"]*)*"')


def encoding_of(head: bytes) -> str:
    """utf-8 when the bytes decode as UTF-8 (a character cut at the end is fine), else
    cp1252 (Windows Latin-1) when they decode as that, else latin-1, which always does."""
    if head.isascii():
        return "utf-8"
    for name in ("utf-8", "cp1252"):
        try:
            codecs.getincrementaldecoder(name)().decode(head, final=False)
        except UnicodeDecodeError:
            continue
        return name
    return "latin-1"


def delimiter_of(text: str, name: str = "") -> str:
    """The delimiter whose count is the same on most of the first lines (quoted text aside);
    a tie goes to the one that makes more fields, then to the order of DELIMITERS."""
    lines = [ln for ln in _QUOTED.sub("Q", text).splitlines()[:50] if ln.strip()]
    if not lines:
        return "\t" if name.lower().endswith(".tsv") else ","
    best, best_key = ",", (0.0, 0, 0)
    for rank, delim in enumerate(DELIMITERS):
        counts = [ln.count(delim) for ln in lines]
        mode, _ = Counter(counts).most_common(1)[0]
        if mode == 0:
            continue
        share = sum(c == mode for c in counts) / len(counts)
        hinted = delim == "\t" and name.lower().endswith(".tsv")
        key = (round(share, 2) + hinted, mode, -rank)
        if key > best_key:
            best, best_key = delim, key
    return best


def has_header(rows: list[list[str]]) -> bool:
    """Whether the first row names the columns: votes column by column, where cells below a
    text cell are numbers or dates, or a text cell does not recur below it."""
    if not rows:
        return False
    first = rows[0][:HEADER_COLUMNS]
    rest = [r for r in rows[1:] if len(r) == len(rows[0])]
    plain = all(c.strip() and not _typed(c) for c in first) and len(set(first)) == len(first)
    votes = 0.0
    for j, cell in enumerate(first):
        below = [r[j] for r in rest if r[j] not in MISSING]
        if below:
            votes += _vote(cell, below)
    return votes > 0 or (votes == 0 and plain)


def _vote(cell: str, below: list[str]) -> float:
    typed_below = all(_typed(v) for v in below)
    if _typed(cell):
        year = (n := number(cell)) is not None and isinstance(n, int) and 1800 <= n <= 2100
        return 0 if year and typed_below else -1  # 1960, 1961... naming yearly columns
    if typed_below:
        return 1
    return -1 if cell in below else 0.5


def _typed(cell: str) -> bool:
    return number(cell) is not None or date_keys(cell) is not None
