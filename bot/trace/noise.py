"""Numbers in an answer that are not figures to check: what the text around them says they
are (dates, times, versions, links, step and list numbers, footnotes, code) and what they
look like alone (years, small counts, ordinals)."""

from __future__ import annotations

import re
from itertools import pairwise

from bot.trace.numbers import Token

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"

# Each pattern marks a stretch of the answer whose numbers are not figures.
_SPANS = [
    # Links: the numbers of a URL or a Markdown link target name nothing.
    r"https?://[^\s)>]+",
    r"\]\([^)\s]*\)",
    # Emoji codes such as ":100:" and ":one_2:".
    r":[a-z0-9_+-]+:",
    # Dates and times.
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?Z?)?",
    r"\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b",
    rf"(?i:\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b)",
    rf"(?i:\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b)",
    r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b",
    r"(?i:\b\d{1,2}\s?[ap]\.?m\b\.?)",
    r"\b(?:19|20)\d{2}[-–/]\d{2}\b",  # fiscal years and seasons: "2019-20"
    # Versions: "1.2.3", "version 2.1", "Python 3.11".
    r"\b\d+(?:\.\d+){2,}\b",
    r"(?i:\b(?:version|python|node|release)\s+v?\d+(?:\.\d+)*)",
    # Steps of the run: "step 3", "steps 2–4", "Step 2 and 5", "tool call 4".
    r"(?i:\b(?:steps?|tool\s+calls?|calls?|cells?)\s*#?\s*\d+"
    r"(?:\s*(?:,|and|&|or|to|through|–|—|-)\s*\d+\b(?![.,]\d))*)",
    # Markers: list items ("1." or "2)" at a line's start, also after a heading's "#"),
    # "#1", "No. 3", footnotes "[1]", "[^2]", "^3".
    r"(?m:^[ \t>]*(?:[-*+][ \t]+)?(?:#+[ \t]*)?\d+[.)](?=\s))",
    r"#\d+",
    r"(?i:\bno\.\s*\d+)",
    r"\[\^?\d+\]",
    r"\^\d+",
    # Ranks: "top 10", "first 5 rows", "bottom 3".
    r"(?i:\b(?:top|bottom|first|last)\s+\d{1,3}\b(?![.,]\d))",
]
_SPAN = re.compile("|".join(f"(?:{pattern})" for pattern in _SPANS))

# Fenced code in a language holds code, not claims; an untagged or text fence is read
# (it usually holds copied output).
_FENCE = re.compile(r"(?ms)^[ \t]*+(`{3,}+|~{3,}+)[ \t]*+([^\s`]*+)[^\n]*+\n.*?(?:^[ \t]*\1|\Z)")
_READ_FENCES = {"", "text", "txt", "plain", "plaintext", "output", "console", "markdown", "md"}

# Inline code that reads as code ("df.head(10)", "x = 42") holds no figures; "`12.5`" does.
_INLINE_CODE = re.compile(r"(?<!`)(`++)([^`\n]+?)(?<!`)\1(?!`)")  # possessive: linear
_CODE_LIKE = re.compile(r"[()\[\]{}=<>/\\:;\"']|[A-Za-z][._][A-Za-z]")

_ORDINAL = re.compile(r"(?:st|nd|rd|th)\b", re.IGNORECASE)

# A Markdown table's rule line ("|---|:--:|"), and the headers of columns that number rows.
_TABLE_RULE = re.compile(r"[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*+\|?\s*+")
_RANK_HEADER = re.compile(r"rank(?:ing)?|#|no\.?|n|pos(?:ition)?|place|index|idx", re.IGNORECASE)


def masked(text: str) -> bytearray:
    """One byte per character of `text`: 1 where numbers are not figures."""
    mask = bytearray(len(text))
    for match in _FENCE.finditer(text):
        if match[2].lower() not in _READ_FENCES:
            mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    for match in _INLINE_CODE.finditer(text):
        if _CODE_LIKE.search(match[2]):
            mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    for match in _SPAN.finditer(text):
        mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    for start, end in _rank_cells(text):
        mask[start:end] = b"\x01" * (end - start)
    return mask


def _rank_cells(text: str) -> list[tuple[int, int]]:
    """The spans of table cells under a "Rank", "#" or "No." header: row numbers."""
    spans = []
    lines, offset = [], 0
    for line in text.splitlines(keepends=True):
        lines.append((offset, line))
        offset += len(line)
    ranks: list[int] = []
    for i, (start, line) in enumerate(lines):
        if "|" not in line:
            ranks = []
        elif i > 0 and "-" in line and _TABLE_RULE.fullmatch(line):
            header = _cells(*lines[i - 1])
            ranks = [k for k, (a, b) in enumerate(header) if _is_rank(text[a:b])]
        elif ranks:
            cells = _cells(start, line)
            spans += [cells[k] for k in ranks if k < len(cells)]
    return spans


def _cells(start: int, line: str) -> list[tuple[int, int]]:
    """The spans of a table row's cells, outer pipes left out."""
    bounds = [start - 1, *(start + i for i, c in enumerate(line) if c == "|"), start + len(line)]
    cells = [(a + 1, b) for a, b in pairwise(bounds)]
    if line.lstrip().startswith("|"):
        cells = cells[1:]
    if line.rstrip().endswith("|"):
        cells = cells[:-1]
    return cells


def _is_rank(header: str) -> bool:
    return bool(_RANK_HEADER.fullmatch(header.strip().strip("*_`").strip()))


def plain_integer(token: Token) -> bool:
    """Digits alone: no separators, point, sign, currency, percent or scale."""
    return (
        token.decimals == 0
        and not token.grouped
        and not token.signed
        and not token.currency
        and not token.percent
        and token.scale == 1
    )


def is_noise(token: Token, text: str, mask: bytearray) -> bool:
    """Whether `token` of `text` is no figure: in a masked stretch, a year (1900 to 2100
    written plainly), a small count (an integer below 10 with no sign of being a quantity:
    "3 countries", "top 3"), or an ordinal ("21st")."""
    if any(mask[token.start : token.end]):
        return True
    if plain_integer(token) and 1900 <= token.number <= 2100:
        return True
    if (
        token.decimals == 0
        and abs(token.number) < 10
        and not (token.currency or token.percent or token.scale != 1)
    ):
        return True
    return bool(_ORDINAL.match(text, token.end))
