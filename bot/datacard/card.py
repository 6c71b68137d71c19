"""What the model and the user are told about a data file, in a form that can be stored."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

Scalar = int | float | str | None


@dataclass
class ColumnCard:
    """One column. `low`/`high` are numbers for numeric columns and ISO strings for dates."""

    name: str
    type: str = "empty"  # integer, decimal, date, datetime, boolean, text, object, array, empty
    count: int = 0  # non-empty cells seen
    empty: int = 0  # empty or missing-marker cells seen ("", NA, null, ..)
    distinct: int | None = 0  # None: not known (Parquet)
    distinct_estimated: bool = False  # True once the distinct sketch overflowed
    low: Scalar = None
    high: Scalar = None
    mean: float | None = None
    top: list[tuple[str, int]] = field(default_factory=list)
    odd: int = 0  # cells that do not fit `type` (e.g. "n/a*" in a number column)
    odd_examples: list[str] = field(default_factory=list)
    declared: str | None = None  # the type as the file itself declares it (Parquet)


@dataclass
class Aggregates:
    """Rows whose label names a group or a total (World, High income, Total) rather than one
    entity: summing them with the detail rows counts things twice."""

    column: str
    count: int
    examples: list[str] = field(default_factory=list)


@dataclass
class Malformed:
    """Records that do not parse cleanly; `first` holds (row, what) with row 1 = first line."""

    ragged: int = 0  # a different number of fields than the header
    quotes: int = 0  # a quote that never closes
    overlong: int = 0  # one record over the line cap, skipped
    blank: int = 0  # empty lines (skipped, not counted as rows)
    invalid: int = 0  # JSON lines or elements that do not parse
    first: list[tuple[int, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.ragged + self.quotes + self.overlong + self.invalid


@dataclass
class DataCard:
    """A profile of one data file (or one sheet of a workbook).

    Exact: size, rows (unless `rows_exact` is False), columns_total, malformed counts.
    From the profiled rows (all of them when `profiled_rows == rows`, else a sample spread
    through the file, or the top rows when `profiled_from == "top"`): column types,
    empties, distinct counts, ranges, top values, aggregates.
    """

    name: str
    kind: str  # csv, tsv, json, jsonl, xlsx, parquet
    size: int | None = None
    encoding: str | None = None
    delimiter: str | None = None
    header: bool | None = None
    rows: int | None = None
    rows_exact: bool = True
    columns_total: int = 0
    columns: list[ColumnCard] = field(default_factory=list)
    profiled_rows: int = 0
    profiled_from: str = "spread"  # "spread" through the file, the "top" rows, or "stats"
    aggregates: Aggregates | None = None
    malformed: Malformed = field(default_factory=Malformed)
    notes: list[str] = field(default_factory=list)

    @property
    def sampled(self) -> bool:
        return self.rows is None or self.profiled_rows < self.rows

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataCard:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["columns"] = [_column(c) for c in data.get("columns", [])]
        if data.get("aggregates"):
            values["aggregates"] = Aggregates(**data["aggregates"])
        bad = dict(data.get("malformed") or {})
        bad["first"] = [tuple(x) for x in bad.get("first", [])]
        values["malformed"] = Malformed(**bad)
        return cls(**values)


def _column(data: dict[str, Any]) -> ColumnCard:
    values = dict(data)
    values["top"] = [tuple(x) for x in values.get("top", [])]
    return ColumnCard(**values)
