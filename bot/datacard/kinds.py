"""The one table of the data files the bot takes: how each kind's bytes are told, its usual
extensions, and how it is taken in. `detect` applies it; nothing else decides a kind.

A file is recognised by its content. Its name never refuses it: the extension only breaks ties
between text kinds (a tab-separated `.tsv`), and a name promising JSON must hold JSON (a
`.json` that is not is broken JSON, not a table to guess at).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a kind is taken in and profiled. stream: profiled on its way into the sandbox; spool:
# checked and profiled whole first (its directory or footer is at the end); unpack:
# gunzip'ed on the way, then recognised again (one layer, of a streamed kind).
Intake = Literal["stream", "spool", "unpack"]


@dataclass(frozen=True)
class Kind:
    name: str  # what `detect` returns
    label: str  # what people are told
    extensions: tuple[str, ...]  # the canonical one first; lower case, with the dot
    magic: tuple[bytes, ...] = ()  # how its bytes start; none: text, told by its content
    intake: Intake = "stream"  # a gzip's card is its content's


KINDS = (
    Kind("csv", "CSV", (".csv", ".txt")),
    Kind("tsv", "TSV", (".tsv",)),
    Kind("json", "JSON", (".json",)),
    Kind("jsonl", "JSON Lines", (".jsonl", ".ndjson")),
    Kind("xlsx", "Excel (.xlsx)", (".xlsx",), (b"PK\x03\x04", b"PK\x05\x06"), "spool"),
    Kind("parquet", "Parquet", (".parquet",), (b"PAR1",), "spool"),  # ends with PAR1 too
    Kind("gzip", "gzip", (".gz", ".gzip"), (b"\x1f\x8b",), "unpack"),  # of a streamed kind
)
BY_NAME = {kind.name: kind for kind in KINDS}
JSON_KINDS = ("json", "jsonl")

# Bytes that are surely no data file, and what to call them: the shortest telling prefix,
# so a file cut short (or a test's stand-in) is still told.
REFUSED = {
    b"\xfd7zXZ": "xz-compressed",
    b"BZh": "bzip2-compressed",
    b"7z\xbc\xaf": "a 7-zip archive",
    b"Rar!\x1a\x07": "a RAR archive",
    b"%PDF": "a PDF",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an old Office file (.xls or .doc; save it as .xlsx)",
    b"SQLite format 3\x00": "an SQLite database",
    b"ARROW1": "an Arrow file",
    b"\x7fELF": "a program",
}
# Zip archives that are not workbooks, by an entry only they have.
OTHER_ZIPS = {
    "word/document.xml": "a Word document",
    "ppt/presentation.xml": "a PowerPoint file",
    "xl/workbook.bin": "a binary .xlsb workbook (save it as .xlsx)",
    "content.xml": "an OpenDocument file (save it as .xlsx or CSV)",
}


def kind(name: str) -> Kind:
    """The table's row for a kind `detect` returned."""
    return BY_NAME[name]


def by_magic(head: bytes) -> Kind | None:
    """The binary kind whose signature `head` starts with, if any."""
    return next((k for k in KINDS if k.magic and head.startswith(k.magic)), None)


def refused(head: bytes) -> str | None:
    """What `head` surely is when it is no data file at all ('a PNG image'), else None."""
    return next((what for magic, what in REFUSED.items() if head.startswith(magic)), None)


def claimed(name: str) -> Kind | None:
    """The kind a file name's extension suggests: a hint, never the answer."""
    lowered = name.lower()
    return next((k for k in KINDS if lowered.endswith(k.extensions)), None)


def unpacked_name(name: str) -> str:
    """The name a gzip'ed file is saved under once unpacked: without its `.gz`."""
    for extension in kind("gzip").extensions:
        if name.lower().endswith(extension):
            return name[: -len(extension)]
    return name


def guess_kind(head: bytes, name: str = "") -> str:
    """json, jsonl, tsv or csv for text starting with `head` (the name's extension only
    breaks the tie between TSV and CSV; the delimiter is sniffed later either way)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"["):
        return "json"
    if text.startswith(b"{"):
        first, _, rest = text.partition(b"\n")
        return "jsonl" if first.rstrip().endswith(b"}") and rest.lstrip()[:1] == b"{" else "json"
    return "tsv" if claimed(name) is kind("tsv") else "csv"


def takes() -> str:
    """What the bot takes, for a refusal: from the table, so it never goes stale."""
    labels = [k.label for k in KINDS if k.intake != "unpack"]
    return f"I take {', '.join(labels[:-1])} and {labels[-1]} files, and gzip'ed CSV or TSV"
