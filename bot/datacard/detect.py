"""What kind of data file some bytes are, told by the bytes (the name only breaks ties)."""

from __future__ import annotations

import codecs
import struct

from bot.datacard.errors import CardError
from bot.datacard.profiler import guess_kind

KINDS = ("csv", "tsv", "json", "jsonl", "xlsx", "parquet", "gzip")
HEAD_BYTES = 8192  # enough of the start for detect()
TAIL_BYTES = 65536  # enough of the end to hold a workbook's zip directory
_REFUSED = {
    b"\xfd7zXZ\x00": "xz-compressed",
    b"BZh": "bzip2-compressed",
    b"7z\xbc\xaf\x27\x1c": "a 7-zip archive",
    b"Rar!\x1a\x07": "a RAR archive",
    b"%PDF": "a PDF",
    b"\x89PNG\r\n\x1a\n": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"GIF8": "a GIF image",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an old Office file (.xls or .doc; save it as .xlsx)",
    b"SQLite format 3\x00": "an SQLite database",
    b"ARROW1": "an Arrow file",
    b"\x7fELF": "a program",
}
_OTHER_ZIPS = {
    "word/document.xml": "a Word document",
    "ppt/presentation.xml": "a PowerPoint file",
    "xl/workbook.bin": "a binary .xlsb workbook (save it as .xlsx)",
    "content.xml": "an OpenDocument file (save it as .xlsx or CSV)",
}


def detect(head: bytes, tail: bytes | None = None, name: str = "") -> str:
    """One of KINDS for a file starting with `head` (its first HEAD_BYTES, or all of it) and
    ending with `tail` (its last TAIL_BYTES; None when not at hand, as for a stream).
    Raises CardError, saying why, for bytes that are no data file we can read."""
    if head.startswith(b"PAR1"):
        if tail is not None and not tail.endswith(b"PAR1"):
            raise CardError(f"Skipped {name}: it starts like Parquet but does not end like it.")
        return "parquet"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _zip_kind(head, tail, name)
    for magic, what in _REFUSED.items():
        if head.startswith(magic):
            raise CardError(f"Skipped {name}: it is {what}, not a data file.")
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        head = head.decode("utf-16", "replace").encode()
    if b"\x00" in head:
        raise CardError(f"Skipped {name}: it is binary, not text data.")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html")):
        raise CardError(f"Skipped {name}: it is a web page, not data.")
    if text.startswith(b"<?xml"):
        raise CardError(f"Skipped {name}: it is XML, not CSV or JSON.")
    return guess_kind(head, name)


def _zip_kind(head: bytes, tail: bytes | None, name: str) -> str:
    names = zip_names(tail) if tail is not None else None
    if names is None:  # no directory at hand: go by the first entries
        names = _local_names(head)
        if "[Content_Types].xml" in names or any(n.startswith("xl/") for n in names):
            return "xlsx"
    elif "[Content_Types].xml" in names and "xl/workbook.xml" in names:
        return "xlsx"
    for entry, what in _OTHER_ZIPS.items():
        if entry in names:
            raise CardError(f"Skipped {name}: it is {what}, not a workbook or data file.")
    raise CardError(f"Skipped {name}: it is a zip archive, not an Excel workbook.")


def zip_names(tail: bytes) -> list[str] | None:
    """Entry names from a zip's central directory, when `tail` holds all of it."""
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) < end + 22:
        return None
    size = struct.unpack_from("<I", tail, end + 12)[0]
    pos, names = end - size, []
    if pos < 0:
        return None
    while pos + 46 <= end and tail[pos : pos + 4] == b"PK\x01\x02":
        length, extra, comment = struct.unpack_from("<HHH", tail, pos + 28)
        names.append(tail[pos + 46 : pos + 46 + length].decode("utf-8", "replace"))
        pos += 46 + length + extra + comment
    return names


def _local_names(head: bytes) -> list[str]:
    names, pos = [], head.find(b"PK\x03\x04")
    while pos >= 0 and pos + 30 <= len(head):
        length, extra = struct.unpack_from("<HH", head, pos + 26)
        names.append(head[pos + 30 : pos + 30 + length].decode("utf-8", "replace"))
        pos = head.find(b"PK\x03\x04", pos + 30 + length + extra)
    return names
