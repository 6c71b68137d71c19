"""Profiling one column from batches of cells, mostly with C-speed builtins (map, Counter,
set), falling back to a per-cell look only for columns that mix kinds."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from bot.datacard.aggregates import is_aggregate
from bot.datacard.card import ColumnCard
from bot.datacard.sketch import Distinct, TopK
from bot.datacard.values import BOOLEAN, ISO_DATE, MISSING, classify, date_keys

ODD_SHARE = 0.02  # up to this share of cells may not fit a column's type (typos, footnotes)
LABELS_CACHED = 4096
LABELS_KEPT = 200
ODD_ONE = 20  # from this many cells on, one odd cell is allowed whatever the share
SETTLED = 200  # cells seen before a column that is mostly text stops checking each cell
_MERGE = {
    frozenset({"integer"}): "integer",
    frozenset({"decimal"}): "decimal",
    frozenset({"integer", "decimal"}): "decimal",
    frozenset({"date"}): "date",
    frozenset({"datetime"}): "datetime",
    frozenset({"date", "datetime"}): "datetime",
    frozenset({"boolean"}): "boolean",
    frozenset({"object"}): "object",
    frozenset({"array"}): "array",
}


class ColumnProfile:
    def __init__(self, name: str, labels: bool = False) -> None:
        self.name = name
        self.labels = labels  # look for aggregate labels (World, Total) in this column
        self.kinds: Counter[str] = Counter()
        self.empty = 0
        self.numbers: list[Any] = [0, 0, None, None]  # count, sum, min, max
        self.dates: list[Any] = [None, None, None, None, 0, 0]  # lo/hi d-m, lo/hi m-d, bad
        self.distinct = Distinct()
        self.top = TopK()
        self.odd_examples: list[str] = []
        self.aggregates: Counter[str] = Counter()  # a few labels, for examples
        self.aggregate_rows = 0
        self.label_cache: dict[str, bool] = {}

    def add_texts(self, cells: list[str]) -> None:
        present = [c for c in cells if c not in MISSING]
        self.empty += len(cells) - len(present)
        if not present:
            return
        self.distinct.add(present)
        if self._numeric(present):
            return
        if self.labels:
            self._labels(present)
        self.top.add(present)
        if self.kinds["text"] >= SETTLED and self.kinds["text"] > sum(self.kinds.values()) / 2:
            self.kinds["text"] += len(present)  # settled as text: no need to try each cell
        elif {c.lower() for c in present} <= BOOLEAN:
            self.kinds["boolean"] += len(present)
        else:
            self._one_by_one(present)

    def _labels(self, present: list[str]) -> None:
        known = self.label_cache
        if len(known) > LABELS_CACHED:
            known.clear()
        for label in set(present).difference(known):
            known[label] = is_aggregate(label)
        found = [c for c in present if known[c]]
        self.aggregate_rows += len(found)
        if len(self.aggregates) < LABELS_KEPT:
            self.aggregates.update(found)

    def add_values(self, values: list[Any]) -> None:
        """Cells decoded from JSON: numbers, strings, booleans, null, objects, arrays."""
        texts = [v for v in values if isinstance(v, str)]
        nums = [v for v in values if type(v) in (int, float)]
        flags = [v for v in values if type(v) is bool]
        self.empty += sum(v is None for v in values)
        self.kinds["object"] += sum(isinstance(v, dict) for v in values)
        self.kinds["array"] += sum(isinstance(v, list) for v in values)
        if texts:
            self.add_texts(texts)
        if nums:
            self.distinct.add(map(repr, nums))
            self._add_numbers(nums, "decimal" if float in map(type, nums) else "integer")
        if flags:
            words = ["true" if f else "false" for f in flags]
            self.kinds["boolean"] += len(flags)
            self.distinct.add(words)
            self.top.add(words)

    def _numeric(self, present: list[str]) -> bool:
        """Take the whole batch as numbers in one C-speed pass when every cell is one."""
        text = self.kinds["text"]
        if text and text >= ODD_SHARE * sum(self.kinds.values()):
            return False  # a text column: parsing numbers would fail anyway
        for kind, parse in (("integer", int), ("decimal", float)):
            try:
                values = list(map(parse, present))
            except ValueError:
                continue
            self._add_numbers(values, kind)
            return True
        return False

    def _add_numbers(self, values: list[Any], kind: str) -> None:
        if not math.isfinite(sum(values)):
            values = [v for v in values if math.isfinite(v)]
        self.kinds[kind] += len(values)
        if values:
            stats = self.numbers
            low, high = min(values), max(values)
            stats[0] += len(values)
            stats[1] += sum(values)
            stats[2] = low if stats[2] is None else min(stats[2], low)
            stats[3] = high if stats[3] is None else max(stats[3], high)

    def _one_by_one(self, present: list[str]) -> None:
        """Classify each distinct cell; once most of the first SETTLED are text, the rest of
        the batch is taken as text unread."""
        dated = self.kinds["date"] + self.kinds["datetime"]
        maybe_dates = dated > self.kinds["text"] or (not dated and date_keys(present[0]))
        if maybe_dates and self._dates(present):
            return
        numbers: dict[str, list[Any]] = {"integer": [], "decimal": []}
        kinds = self.kinds
        for seen, (cell, n) in enumerate(Counter(present).items()):
            if seen >= SETTLED and kinds["text"] > sum(kinds.values()) / 2:
                kinds["text"] += n
                continue
            kind, value = classify(cell)
            if kind in numbers:
                numbers[kind].extend([value] * n)
                continue
            kinds[kind] += n
            if kind in ("date", "datetime"):
                self._add_date(value[0], value[0], 0)
                self._add_date(value[1], value[1], 2)
            elif kind == "text" and len(self.odd_examples) < 3:
                self.odd_examples.append(cell[:40])
        for kind, values in numbers.items():
            if values:
                self._add_numbers(values, kind)

    def _dates(self, present: list[str]) -> bool:
        """Take a batch of a date column at once, when every cell is a date."""
        if all(map(ISO_DATE.fullmatch, present)):  # YYYY-MM-DD sorts as it reads
            self.kinds["date"] += len(present)
            self._add_date(min(present), max(present), 0)
            return True
        found = list(map(date_keys, present))
        keys = [key for key in found if key is not None]
        if len(keys) < len(found):
            return False
        for key in keys:
            self.kinds["datetime" if key[2] else "date"] += 1
            self._add_date(key[0], key[0], 0)
            self._add_date(key[1], key[1], 2)
        return True

    def _add_date(self, low: str | None, high: str | None, at: int) -> None:
        """Widen the range of dates read day first (at 0) or month first (at 2)."""
        d = self.dates
        if low is None or high is None:
            d[4 + at // 2] += 1
            return
        d[at] = low if d[at] is None else min(d[at], low)
        d[at + 1] = high if d[at + 1] is None else max(d[at + 1], high)

    def card(self) -> ColumnCard:
        total = sum(self.kinds.values())
        distinct, estimated = self.distinct.estimate()
        card = ColumnCard(self.name, count=total, empty=self.empty, distinct=distinct)
        card.distinct_estimated = estimated
        card.type = self._type(total)
        card.odd = total - sum(n for k, n in self.kinds.items() if _fits(k, card.type))
        card.odd_examples = self.odd_examples if card.odd else []
        if card.type in ("integer", "decimal") and self.numbers[0]:
            card.low, card.high = self.numbers[2], self.numbers[3]
            card.mean = self.numbers[1] / self.numbers[0]
        elif card.type in ("date", "datetime"):
            d = self.dates
            card.low, card.high = (d[0], d[1]) if d[4] == 0 or d[5] > 0 else (d[2], d[3])
        elif card.type in ("text", "boolean"):
            card.top = self.top.top(5)
        return card

    def _type(self, total: int) -> str:
        if not total:
            return "empty"
        text = self.kinds["text"]
        others = frozenset(k for k, n in self.kinds.items() if n and k != "text")
        if text > max(ODD_SHARE * total, total >= ODD_ONE) or others not in _MERGE:
            return "text"
        return _MERGE[others]


def _fits(kind: str, column_type: str) -> bool:
    if column_type == "decimal":
        return kind in ("integer", "decimal")
    if column_type == "datetime":
        return kind in ("date", "datetime")
    return kind == column_type or column_type == "text"
