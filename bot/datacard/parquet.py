"""A card for a Parquet file from its footer alone: rows, columns with their declared types,
and (when the writer kept statistics) exact nulls and ranges per column."""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.datacard.card import ColumnCard, DataCard
from bot.datacard.csvprof import DETAIL
from bot.datacard.errors import CardError
from bot.datacard.thrift import CompactReader, TooLarge

MAX_FOOTER = 64 << 20
PHYSICAL = ["BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY", "FIXED"]
CONVERTED = [
    *("UTF8", "MAP", "MAP_KEY_VALUE", "LIST", "ENUM", "DECIMAL", "DATE", "TIME_MILLIS"),
    *("TIME_MICROS", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "UINT_8", "UINT_16", "UINT_32"),
    *("UINT_64", "INT_8", "INT_16", "INT_32", "INT_64", "JSON", "BSON", "INTERVAL"),
]
LOGICAL = {1: "STRING", 2: "MAP", 3: "LIST", 4: "ENUM", 5: "DECIMAL", 6: "DATE", 7: "TIME"}
LOGICAL |= {8: "TIMESTAMP", 10: "INTEGER", 11: "NULL", 12: "JSON", 13: "BSON", 14: "UUID"}
LOGICAL |= {15: "FLOAT16"}
_KIND = {"STRING": "text", "UTF8": "text", "ENUM": "text", "JSON": "text", "UUID": "text"}
_KIND |= {"DATE": "date", "TIMESTAMP": "datetime", "TIMESTAMP_MILLIS": "datetime"}
_KIND |= {"TIMESTAMP_MICROS": "datetime", "TIMESTAMP_NANOS": "datetime"}
_KIND |= {"DECIMAL": "decimal", "LIST": "array"}
_KIND |= {"MAP": "object", "TIME": "time", "TIME_MILLIS": "time", "TIME_MICROS": "time"}
_PLAIN = {"BOOLEAN": "boolean", "INT32": "integer", "INT64": "integer", "INT96": "datetime"}
_PLAIN |= {"FLOAT": "decimal", "DOUBLE": "decimal", "BYTE_ARRAY": "binary", "FIXED": "binary"}
_UNPACK = {"INT32": "<i", "INT64": "<q", "FLOAT": "<f", "DOUBLE": "<d"}


def card_parquet(source: str | Path | bytes, name: str) -> DataCard:
    """Read only the footer: Parquet keeps the schema and row counts at the end."""
    footer, size = _footer(source, name)
    reader, note = CompactReader(footer, name), None
    try:
        try:
            meta = reader.struct()
        except TooLarge:
            if 2 not in reader.top or 4 in reader.top:  # no whole schema: nothing to show
                raise
            meta, note = reader.top, "The metadata is too large: row groups and statistics unread."
        card = _card(meta, name, size)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError):
        raise CardError(f"Skipped {name}: its Parquet metadata is malformed.") from None
    if note:
        card.notes = [note, *card.notes[1:]]
    return card


def _card(meta: dict[int, Any], name: str, size: int) -> DataCard:
    """The card from the footer's fields, whatever their types (a wrong one raises)."""
    schema, groups = meta.get(2) or [], meta.get(4) or []
    columns = _columns(schema)
    stats = _stats(groups, {c.name: c for c in columns})
    card = DataCard(name, "parquet", size=size, rows=meta.get(3, 0), columns_total=len(columns))
    card.columns = columns[:DETAIL]
    for column in card.columns:
        if column.name in stats:
            column.empty = stats[column.name]
            # both are counts once the footer gave stats (the fields allow None before)
            column.count = card.rows - column.empty  # type: ignore[operator]
    # the footer's row count is an int (meta field 3)
    card.profiled_rows = card.rows if stats else 0  # type: ignore[assignment]
    card.profiled_from = "stats"
    writer = meta.get(6, b"").decode("utf-8", "replace")
    card.notes.append(f"{len(groups)} row groups" + (f"; written by {writer}" if writer else ""))
    if not stats:
        card.notes.append("No column statistics in the file: types only.")
        card.profiled_from = "types"
    return card


def _footer(source: str | Path | bytes, name: str) -> tuple[bytes, int]:
    if isinstance(source, bytes):
        data, size = source, len(source)
        end = data[-8:]
    else:
        with open(source, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - 8))
            end = handle.read(8)
    length = struct.unpack("<I", end[:4])[0] if len(end) == 8 else -1
    if size < 12 or end[4:] != b"PAR1" or not 0 < length <= min(MAX_FOOTER, size - 12):
        raise CardError(f"Skipped {name}: it is not a whole Parquet file.")
    if isinstance(source, bytes):
        return source[-8 - length : -8], size
    with open(source, "rb") as handle:
        handle.seek(size - 8 - length)
        return handle.read(length), size


def _columns(schema: list[dict[int, Any]]) -> list[ColumnCard]:
    """Top-level fields: leaves with their types, groups as a list, map or struct."""
    columns, i = [], 1
    while i < len(schema):
        element = schema[i]
        declared = _declared(element)
        name = element.get(4, b"?").decode("utf-8", "replace")
        kind = _KIND.get(declared[1]) or _PLAIN.get(declared[0], "object")
        if element.get(5):  # a group: its descendants follow it
            kind = _KIND.get(declared[1], "object")
            i = _skip(schema, i)
        else:
            i += 1
        column = ColumnCard(name, kind, distinct=None)
        column.declared = " ".join(d for d in declared if d)
        columns.append(column)
    return columns


def _declared(element: dict[int, Any]) -> tuple[str, str]:
    physical = PHYSICAL[element[1]] if 0 <= element.get(1, -1) < len(PHYSICAL) else ""
    logical = element.get(10)
    if logical:
        which = next(iter(logical))
        if which == 8:  # TIMESTAMP, with its unit: {1: MILLIS, 2: MICROS, 3: NANOS}
            unit = next(iter(logical[8].get(2) or {2: None}))
            return physical, "TIMESTAMP_" + {1: "MILLIS", 3: "NANOS"}.get(unit, "MICROS")
        return physical, LOGICAL.get(which, "")
    converted = element.get(6)
    return physical, CONVERTED[converted] if converted is not None and converted < 22 else ""


def _skip(schema: list[dict[int, Any]], i: int) -> int:
    """The index after element i and all its descendants."""
    pending = 1
    while pending and i < len(schema):
        pending += schema[i].get(5, 0) - 1
        i += 1
    return i


def _stats(groups: list[dict[int, Any]], columns: dict[str, ColumnCard]) -> dict[str, int]:
    """Nulls per top-level leaf column, summed over row groups; ranges set on the cards."""
    nulls: dict[str, int] = {}
    for group in groups:
        for chunk in group.get(1) or []:
            meta = chunk.get(3) or {}
            path = [p.decode("utf-8", "replace") for p in meta.get(3) or []]
            stats, column = meta.get(12), columns.get(path[0]) if len(path) == 1 else None
            if column is None or stats is None or 3 not in stats:
                continue
            nulls[column.name] = nulls.get(column.name, 0) + stats[3]
            for at, key in ((0, stats.get(6, stats.get(2))), (1, stats.get(5, stats.get(1)))):
                if key is not None and (value := _decode(column, key)) is not None:
                    _widen(column, at, value)
    return nulls


def _decode(column: ColumnCard, raw: bytes) -> Any:
    physical, _, logical = (column.declared or "").partition(" ")
    if physical in _UNPACK and len(raw) == struct.calcsize(_UNPACK[physical]):
        value = struct.unpack(_UNPACK[physical], raw)[0]
        if logical == "DATE":
            return (date(1970, 1, 1) + timedelta(days=value)).isoformat()
        if logical.startswith("TIMESTAMP_"):
            return _moment(value, logical)
        return value if column.type in ("integer", "decimal") else None
    return None


def _moment(value: int, logical: str) -> str | None:
    per_second = {"MILLIS": 10**3, "MICROS": 10**6, "NANOS": 10**9}[logical[10:]]
    try:
        return (datetime(1970, 1, 1) + timedelta(seconds=value / per_second)).isoformat(" ")
    except OverflowError:
        return None


def _widen(column: ColumnCard, at: int, value: Any) -> None:
    if at == 0:
        column.low = value if column.low is None else min(column.low, value)
    else:
        column.high = value if column.high is None else max(column.high, value)
