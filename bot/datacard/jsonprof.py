"""Profiling JSON Lines (one object per line) and JSON (an array of objects, or an object
holding one), keys as columns. Records are counted exactly; cells are profiled on a sample."""

from __future__ import annotations

import codecs
import json
from typing import Any

from bot.datacard.card import DataCard, Malformed
from bot.datacard.columns import ColumnProfile
from bot.datacard.csvprof import (
    BLOCK_CELLS,
    DETAIL,
    FIRST,
    HEAD_CELLS,
    LINE_CAP,
    aggregates,
    sampled,
)
from bot.datacard.jsonstream import advance

KEYS_CAP = 10_000  # distinct keys remembered; a file with more says "at least"


class Records:
    """Columns from the keys of sampled records (first seen, first listed)."""

    def __init__(self, kind: str, encoding: str | None) -> None:
        self.kind, self.encoding = kind, encoding or "utf-8"
        self.count = 0
        self.keys: dict[str, None] = {}
        self.profiles: dict[str, ColumnProfile] = {}
        self.profiled = 0
        self.bad = Malformed()
        self.notes: list[str] = []
        self.exact = True
        self.blocks = 0

    def quota(self) -> int:
        """Records to profile from the next block."""
        self.blocks += 1
        width = max(1, min(len(self.profiles), DETAIL))
        return max(BLOCK_CELLS // width * sampled(self.blocks), HEAD_CELLS // width - self.profiled)

    def profile(self, rows: list[Any]) -> None:
        rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
        for row in rows:
            for key in row:
                if key not in self.keys and len(self.keys) < KEYS_CAP:
                    self.keys[key] = None
                    if len(self.profiles) < DETAIL:
                        profile = ColumnProfile(key, len(self.profiles) < 5)
                        profile.empty = self.profiled  # earlier records lack it
                        self.profiles[key] = profile
        for key, profile in self.profiles.items():
            profile.add_values([r.get(key) for r in rows])
        self.profiled += len(rows)

    def malformed(self, kind: str, row: int, why: str) -> None:
        setattr(self.bad, kind, getattr(self.bad, kind) + 1)
        if len(self.bad.first) < FIRST:
            self.bad.first.append((row, why))

    def card(self) -> DataCard:
        card = DataCard("", self.kind, encoding=self.encoding, rows=self.count)
        card.rows_exact, card.columns_total = self.exact, len(self.keys)
        card.columns = [p.card() for p in self.profiles.values()]
        card.profiled_rows, card.malformed = self.profiled, self.bad
        card.aggregates, card.notes = aggregates(list(self.profiles.values())), self.notes
        if len(self.keys) >= KEYS_CAP:
            card.notes.append(f"At least {KEYS_CAP:,} distinct keys; the first are listed.")
        return card


class JsonLinesEngine(Records):
    def __init__(self, encoding: str | None) -> None:
        super().__init__("jsonl", encoding)
        self.lines = 0
        self.carry = b""
        self.skipping = False  # inside a line over the cap: drop bytes up to its end

    def block(self, pieces: list[bytes | memoryview], final: bool) -> None:
        buf = b"".join([self.carry, *pieces])
        if self.skipping:
            cut = buf.find(b"\n")
            buf, self.skipping = (b"", True) if cut < 0 else (buf[cut + 1 :], False)
        if final and buf and not buf.endswith(b"\n"):
            buf += b"\n"
        end = buf.rfind(b"\n") + 1
        region, self.carry = buf[:end], buf[end:]
        if region:
            self._lines(region)
        if len(self.carry) > LINE_CAP:
            self.lines += 1
            self.malformed("overlong", self.lines, f"longer than {LINE_CAP >> 20} MB")
            self.carry, self.skipping = b"", True

    def _lines(self, region: bytes) -> None:
        base, lines = self.lines, region.count(b"\n")
        self.lines += lines
        starts = region.count(b"\n{") + region.startswith(b"{")
        ends = region.count(b"}\n") + region.count(b"}\r\n")
        if starts == ends == lines:  # every line looks like one object: parse a sample
            self.count += lines
            want, end = self.quota(), 0
            for _ in range(want):
                end = region.find(b"\n", end) + 1 or len(region)
            text = region[:end].decode(self.encoding, "replace").split("\n")[:-1]
            rows = [self._parse(line, base + i) for i, line in enumerate(text)]
            self.count -= sum(r is None for r in rows)
            self.profile([r for r in rows if r is not None])
            return
        rows = []
        for i, line in enumerate(region.decode(self.encoding, "replace").split("\n")[:-1]):
            if not line.strip():
                self.bad.blank += 1
            elif (row := self._parse(line, base + i)) is not None:
                self.count += 1
                rows.append(row)
        self.profile(rows[: self.quota()])

    def _parse(self, line: str, index: int) -> Any:
        try:
            return json.loads(line)
        except ValueError:
            why = "not valid JSON"
        except RecursionError:
            why = "nested too deeply"
        self.malformed("invalid", index + 1, why)
        return None

    def card(self) -> DataCard:
        card = super().card()
        if self.profiled < self.count:
            card.notes.append("Lines checked to hold one object each; parsed on a sample.")
        return card


class JsonEngine(Records):
    """A streamed JSON document: records are the elements of the top-level array, or of the
    first array value of a top-level object (like {"data": [...]}), parsed one at a time."""

    def __init__(self, encoding: str | None) -> None:
        super().__init__("json", encoding)
        self.text = ""
        self.pos = 0
        self.decoder = codecs.getincrementaldecoder(self.encoding)("replace")
        self.json = json.JSONDecoder()
        self.stack: list[str] = []  # "[" or "{" for each open container we are inside
        self.state = "start"
        self.array_key: str | None = None
        self.batch: list[Any] = []
        self.members: dict[str, Any] = {}  # a top-level object's values (when no array)

    def block(self, pieces: list[bytes | memoryview], final: bool) -> None:
        if self.state == "stopped":
            return
        self.text = self.text[self.pos :] + self.decoder.decode(b"".join(pieces), final)
        self.pos = 0
        advance(self, final)
        self.profile(self.batch[: self.quota()])
        self.batch = []
        if len(self.text) - self.pos > LINE_CAP and self.state != "stopped":
            self.stop(f"A JSON value over {LINE_CAP >> 20} MB: not profiled past it.")

    def stop(self, why: str) -> None:
        self.state, self.exact = "stopped", False
        self.notes.append(why)
        self.text, self.pos = "", 0

    def card(self) -> DataCard:
        card = super().card()
        if self.array_key:
            card.notes.insert(0, f'Rows are the elements of "{self.array_key}".')
        return card
