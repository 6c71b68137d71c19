"""Reading one cell: missing markers, numbers, dates and booleans."""

from __future__ import annotations

import re
from typing import Any

# Cells that mean "no value" in common exports (World Bank uses "..", Excel "#N/A").
MISSING = frozenset(
    {"", "NA", "N/A", "n/a", "na", "NaN", "nan", "NULL", "null", "Null", "None", "none"}
    | {"-", "--", "..", "#N/A", "?", " "}
)
TRUE = frozenset({"true", "yes", "t", "y"})
BOOLEAN = TRUE | {"false", "no", "f", "n"}

ISO_DATE = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_TIME = r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})?)?"
_YMD = re.compile(r"(\d{4})[-/.](\d{1,2})(?:[-/.](\d{1,2})" + _TIME + ")?")
_DMY = re.compile(r"(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})" + _TIME)

# (key if day first, key if month first, has a time); keys sort like the dates they stand for
DateKeys = tuple[str | None, str | None, bool]


def date_keys(text: str) -> DateKeys | None:
    """ISO-like keys for a date such as 2020-01-31, 2020/1/31, 31/01/2020, 01.31.2020 14:05;
    None when `text` is not one. Dates with the year last may be day or month first."""
    if m := _YMD.fullmatch(text):
        year, month, day = m.group(1), int(m.group(2)), m.group(3)
        if not 1 <= month <= 12 or (day and not 1 <= int(day) <= 31):
            return None
        key = _key(year, month, int(day) if day else None, m.group(4, 5, 6))
        return key, key, m.group(4) is not None
    if m := _DMY.fullmatch(text):
        a, b, year = int(m.group(1)), int(m.group(2)), m.group(3)
        clock = m.group(4, 5, 6)
        day_first = _key(year, b, a, clock) if 1 <= b <= 12 and 1 <= a <= 31 else None
        month_first = _key(year, a, b, clock) if 1 <= a <= 12 and 1 <= b <= 31 else None
        if day_first or month_first:
            return day_first, month_first, m.group(4) is not None
    return None


def _key(year: str, month: int, day: int | None, clock: tuple[Any, ...]) -> str:
    key = f"{year}-{month:02d}" + (f"-{day:02d}" if day else "")
    hour, minute, second = clock
    if hour is not None:
        key += f" {int(hour):02d}:{minute}" + (f":{second}" if second else "")
    return key


def number(text: str) -> int | float | None:
    """The number in a cell (also 1,234.5 with thousands separators), else None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    if _THOUSANDS.fullmatch(text):
        return number(text.replace(",", ""))
    return None


def classify(text: str) -> tuple[str, Any]:
    """(type, value) for one present cell: integer, decimal, date, datetime, boolean or text."""
    value = number(text)
    if value is not None:
        return ("integer" if isinstance(value, int) else "decimal"), value
    if keys := date_keys(text):
        return ("datetime" if keys[2] else "date"), keys
    if text.lower() in BOOLEAN:
        return "boolean", text.lower() in TRUE
    return "text", text
