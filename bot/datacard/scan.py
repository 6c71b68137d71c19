"""Whole CSV records in a byte buffer, and their field counts, at C speed.

Quotes follow Python's csv module: a quote opens a quoted field only at the start of a field
(`5" screen` is plain text), "" inside a quoted field is a quote, and a quoted field may hold
delimiters and newlines. A block without quotes is checked with translate and count alone.
With a few quotes, quoted fields are first replaced by a placeholder (one regex pass), which
leaves only the delimiters and newlines that separate fields and records. With many (every
text field quoted), one possessive regex match takes runs of well-formed records at once,
and only the records it stops at (ragged, multi-line, odd quoting) are looked at one by one."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import islice

LOCATED = 8  # ragged records located per block (the card names the first few)
_BODY = rb'[^"]*(?:""[^"]*)*"'  # a quoted field after its opening quote, closing quote included
_FLAT = rb'[^"\n]*(?:""[^"\n]*)*"'  # the same, on one line


@dataclass
class Scanned:
    end: int  # bytes taken: whole records only
    records: int  # records in those bytes, blank lines included
    ragged: list[int] = field(default_factory=list)  # the first few, as indexes in the block
    ragged_count: int = 0
    blank: int = 0  # blank lines among the records
    open_quote: bool = False  # the record at `end` has a quote that has not closed (yet)
    ascii: bool = True  # all the bytes scanned were ASCII


class RecordScanner:
    def __init__(self, delimiter: str, fields: int) -> None:
        self.delim = d = delimiter.encode()
        self.fields = fields
        e = re.escape(d)
        opening = b'"(?<![^' + e + rb'\n]")'  # a quote at the start of a field
        self._quoted = re.compile(opening + _BODY)
        self._opening = re.compile(opening)
        one = rb'(?>"' + _BODY + rb"[^" + e + rb"\n]*|(?!\")[^" + e + rb"\n]*)"
        self._record = re.compile(one + rb"(?:" + e + one + rb")*\n")
        self._records = re.compile(rb"(?:" + one + rb"(?:" + e + one + rb")*\n)*+")
        plain = rb'(?>"' + _FLAT + rb'|[^"' + e + rb"\n]*)"
        run = plain + rb"(?:" + e + plain + rb"){%d}\r?\n" % (fields - 1)
        self._run = re.compile(rb"(?:" + run + rb")*+")
        keep = {d[0], ord("\n")}
        self._delete = bytes(b for b in range(256) if b not in keep)
        self._skeleton = bytes(b for b in range(128) if b not in keep and b != ord('"'))
        self._high = bytes(range(128, 256)) + b'"'
        self._line = d * (fields - 1) + b"\n"

    def scan(self, buf: bytes) -> Scanned:
        """The whole records at the start of `buf`, which must start at a record boundary."""
        end = buf.rfind(b"\n") + 1
        if not end:
            return Scanned(0, 0)
        # One C pass keeps what matters: delimiters, newlines, quotes, non-ASCII bytes.
        skeleton = buf.translate(None, self._skeleton)
        ascii = skeleton.isascii()
        if not ascii:
            skeleton = skeleton.translate(None, self._high)
        if skeleton.find(b'"') < 0:
            done = self._count(skeleton, buf, end)  # the common case: no copy of `buf`
        else:
            done = self._quoted_records(buf[:end])
        done.ascii = ascii
        return done

    def _quoted_records(self, region: bytes) -> Scanned:
        end = len(region)
        if region.count(b'"') > region.count(b"\n"):
            return self._dense(region)
        bare = self._quoted.sub(b"Q", region)
        if (opened := self._opening.search(bare)) is None:
            return self._check(bare, end)
        cut = bare.rfind(b"\n", 0, opened.start()) + 1
        done = self._check(bare[:cut], cut)
        done.end = _matched(self._records.match(region)).end()  # the same record, raw
        done.open_quote = True
        return done

    def _dense(self, region: bytes) -> Scanned:
        done, pos = Scanned(0, 0), 0
        while pos < len(region):
            run_end = _matched(self._run.match(region, pos)).end()
            done.records += region.count(b"\n", pos, run_end)
            pos = run_end
            if pos == len(region):
                break
            record = self._record.match(region, pos)
            if record is None:
                done.open_quote = True
                break
            bare = self._quoted.sub(b"Q", record.group())
            if bare.count(self.delim) != self.fields - 1:
                if not bare.strip():
                    done.blank += 1
                else:
                    done.ragged_count += 1
                    done.ragged += [done.records][: LOCATED - len(done.ragged)]
            done.records += 1
            pos = record.end()
        done.end = pos
        return done

    def _check(self, bare: bytes, end: int) -> Scanned:
        """Count the records in `bare[:end]` (quoted fields already replaced) and find those
        with the wrong number of fields."""
        return self._count(bare.translate(None, self._delete), bare, end)

    def _count(self, reduced: bytes, bare: bytes, end: int) -> Scanned:
        """The same, given `bare` reduced to its delimiters and newlines. It may run past
        `end` (translating all of `bare` beats copying a slice): that part is left out."""
        cut = reduced.rfind(b"\n") + 1
        line = self._line
        records, extra = divmod(cut, len(line))
        if not extra and reduced.startswith(line * records):  # each record: the same fields
            return Scanned(end, records)
        records = reduced.count(b"\n", 0, cut)
        # Whole-list operations only (len, count): a block may be a million ragged lines.
        fields = list(map(len, reduced[:cut].split(b"\n", records)[:records]))  # delimiters
        want = self.fields - 1
        odd = records - fields.count(want)
        if not odd:
            return Scanned(end, records)
        stripped = list(map(bytes.strip, bare[:end].split(b"\n", records)[:records]))
        if self.delim.isspace():  # a blank line may hold tabs: tell them apart one by one
            pairs = zip(fields, stripped, strict=True)
            blank = sum(1 for n, text in pairs if n != want and not text)
        else:  # a blank line has no delimiter, so it is odd unless no line has one
            blank = stripped.count(b"") if want else 0
        ragged = (i for i, n in enumerate(fields) if n != want and stripped[i])
        return Scanned(end, records, list(islice(ragged, LOCATED)), odd - blank, blank)


def _matched(match: re.Match[bytes] | None) -> re.Match[bytes]:
    """A match of a pattern that matches anywhere (it may match nothing)."""
    assert match is not None
    return match
