"""Numbers in an answer that are not figures to check: what the text around them says they
are (dates, times, versions, links, step and list numbers, footnotes, code) and what they
look like alone (years, small counts, ordinals)."""

from __future__ import annotations

import re

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
_FENCE = re.compile(r"(?ms)^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n]*\n.*?(?:^[ \t]*\1|\Z)")
_READ_FENCES = {"", "text", "txt", "plain", "plaintext", "output", "console", "markdown", "md"}

_ORDINAL = re.compile(r"(?:st|nd|rd|th)\b", re.IGNORECASE)


def masked(text: str) -> bytearray:
    """One byte per character of `text`: 1 where numbers are not figures."""
    mask = bytearray(len(text))
    for match in _FENCE.finditer(text):
        if match[2].lower() not in _READ_FENCES:
            mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    for match in _SPAN.finditer(text):
        mask[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    return mask


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
