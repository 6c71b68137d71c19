"""Profiling CSV and TSV: every record is counted and its fields checked (scan.py); cells are
profiled on a sample: the first rows, then a few rows from every block."""

from __future__ import annotations

import csv
import io

from bot.datacard.aggregates import examples
from bot.datacard.card import Aggregates, DataCard, Malformed
from bot.datacard.columns import ColumnProfile
from bot.datacard.scan import RecordScanner, Scanned
from bot.datacard.sniff import delimiter_of, encoding_of, has_header

SNIFF = 64 << 10  # bytes looked at for the delimiter and the header
LINE_CAP = 8 << 20  # one record longer than this is counted as malformed and skipped
DETAIL = 200  # columns profiled in detail; the rest are counted
HEAD_CELLS = 10_000  # cells profiled from the first rows
BLOCK_CELLS = 128  # cells profiled from each later block
LABEL_COLUMNS = 5  # leftmost columns checked for aggregate labels (World, Total)
FIRST = 5  # malformed records located


def sampled(block: int) -> bool:
    """Whether to profile a few rows of this block: every one of the first 64, then every
    second up to 192, every third... so that sampling costs less and less per megabyte."""
    return block % (1 + block // 64) == 0


class CsvEngine:
    def __init__(
        self, head: bytes, name: str, encoding: str | None, whole: bool, tsv: bool = False
    ) -> None:
        """`head`: the file's first bytes (all of them if `whole`); `tsv`: tabs expected."""
        self.encoding = encoding or encoding_of(head)
        first_line = head.find(b"\n") + 1 or len(head)
        whole = whole and len(head) <= max(SNIFF, first_line)
        text = head[: max(SNIFF, first_line)].decode(self.encoding, "replace")
        if whole and not text.endswith("\n"):
            text += "\n"
        self.delimiter = delimiter_of(text[:SNIFF], "x.tsv" if tsv else name)
        rows = _parse(text, self.delimiter, whole, None)[:50]
        self.fields = len(rows[0]) if rows else 1
        self.header = has_header(rows)
        names = rows[0][:DETAIL] if self.header and rows else []
        names += [f"column {i + 1}" for i in range(len(names), min(self.fields, DETAIL))]
        labels = range(LABEL_COLUMNS)
        self.profiles = [ColumnProfile(n, j in labels) for j, n in enumerate(names)]
        self.scanner = RecordScanner(self.delimiter, self.fields)
        self.records = 0  # records seen, blank and malformed lines included
        self.bad = Malformed()
        self.profiled = 0
        self.head_rows = max(20, HEAD_CELLS // max(1, len(self.profiles)))
        self.block_rows = max(1, BLOCK_CELLS // max(1, len(self.profiles)))
        self.blocks = 0
        self.carry = b""
        self.skipping = False  # inside a line over the cap: drop bytes up to its end
        self.notes: list[str] = []

    def block(self, pieces: list[bytes | memoryview], final: bool) -> None:
        buf = b"".join([self.carry, *pieces])  # the one copy of the bytes
        if self.skipping:
            cut = buf.find(b"\n")
            buf, self.skipping = (b"", True) if cut < 0 else (buf[cut + 1 :], False)
        if final and buf and not buf.endswith(b"\n"):
            buf += b"\n"
        while buf:
            done = self.scanner.scan(buf)
            self._take(buf, done)
            buf = buf[done.end :]
            if not buf or not (final or len(buf) > LINE_CAP):
                break
            cut = buf.find(b"\n")
            if done.open_quote and cut >= 0:  # give up on that quote: skip its line
                self._malformed("quotes", "a quote that does not close")
                buf = buf[cut + 1 :]
            else:
                self._malformed("overlong", f"longer than {LINE_CAP >> 20} MB")
                buf, self.skipping = b"", not final
        self.carry = buf

    def _take(self, buf: bytes, done: Scanned) -> None:
        """Count the records in `buf[:done.end]` and profile the first few."""
        base, self.records = self.records, self.records + done.records
        self.bad.ragged += done.ragged_count  # counted at once: a file may be all ragged
        for i in done.ragged[: max(0, FIRST - len(self.bad.first))]:
            self.bad.first.append((base + i + 1, "wrong number of fields"))
        self.bad.blank += done.blank
        if not done.end:
            return
        encoding = self._check_encoding(buf, done, base)
        self.blocks += 1
        want = max(self.block_rows * sampled(self.blocks), self.head_rows - self.profiled)
        skip = 1 if base == 0 and self.header else 0
        if self.profiles and want:
            self._profile(buf, done.end, want + skip, skip, encoding)

    def _profile(self, buf: bytes, limit: int, want: int, skip: int, encoding: str) -> None:
        end, taken = 0, 0
        while taken < want and end < limit:
            end = buf.find(b"\n", end, limit) + 1
            taken += 1
        text = buf[:end].decode(encoding, "replace")
        width = min(self.fields, DETAIL)
        rows = _parse(text, self.delimiter, end == limit, width)[skip:want]
        full = min(self.fields, width + 1)  # more fields than that were cut off by _parse
        rows = [r[:width] for r in rows if len(r) == full]
        if not rows:
            return
        self.profiled += len(rows)
        for profile, cells in zip(self.profiles, zip(*rows, strict=True), strict=False):
            profile.add_texts(list(cells))

    def _check_encoding(self, buf: bytes, done: Scanned, base: int) -> str:
        if self.encoding != "utf-8" or done.ascii:
            return self.encoding
        try:
            buf[: done.end].decode("utf-8")
        except UnicodeDecodeError:
            if not self.notes:
                self.notes.append(f"Not UTF-8 from about row {base + 1}: read as Latin-1 there.")
            return "latin-1"
        return "utf-8"

    def _malformed(self, kind: str, why: str, index: int | None = None) -> None:
        if index is None:
            index, self.records = self.records, self.records + 1
        setattr(self.bad, kind, getattr(self.bad, kind) + 1)
        if len(self.bad.first) < FIRST:
            self.bad.first.append((index + 1, why))

    def card(self) -> DataCard:
        header = 1 if self.header and self.records else 0
        rows = self.records - header - self.bad.blank - self.bad.quotes - self.bad.overlong
        card = DataCard("", "tsv" if self.delimiter == "\t" else "csv", encoding=self.encoding)
        card.delimiter, card.header, card.rows = self.delimiter, bool(self.header), rows
        card.columns_total = self.fields if self.records else 0
        card.columns = [p.card() for p in self.profiles] if self.records else []
        card.profiled_rows, card.malformed, card.notes = self.profiled, self.bad, self.notes
        card.aggregates = aggregates(self.profiles)
        return card


def aggregates(profiles: list[ColumnProfile]) -> Aggregates | None:
    """The column with the most aggregate labels, if any."""
    best = max(profiles, key=lambda p: p.aggregate_rows, default=None)
    if best is None or not best.aggregate_rows:
        return None
    labels = [label for label, _ in best.aggregates.most_common(100)]
    return Aggregates(best.name, best.aggregate_rows, examples(labels))


def _parse(text: str, delimiter: str, complete: bool, width: int | None) -> list[list[str]]:
    """The rows of `text`, with at most `width` + 1 fields each when `width` is given (the
    last one standing for the rest). Unless `complete`, the last row may be cut short."""
    if '"' not in text:  # each line is a row; the text after the last newline is not whole
        cut = -1 if width is None else width
        return [ln.rstrip("\r").split(delimiter, cut) for ln in text.split("\n")[:-1]]
    rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False))
    if width is not None:
        rows = [r[: width + 1] for r in rows]
    return rows if complete else rows[:-1]
