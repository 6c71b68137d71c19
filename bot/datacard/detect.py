"""What kind of data file some bytes are: the table of `kinds` applied to a file's first
(and, when at hand, last) bytes. The name only breaks ties, never refuses a file."""

from __future__ import annotations

import codecs
import struct

from bot.datacard.errors import CardError
from bot.datacard.kinds import (
    JSON_KINDS,
    OTHER_ZIPS,
    by_magic,
    claimed,
    guess_kind,
    refused,
    takes,
)

HEAD_BYTES = 8192  # enough of the start for detect()
TAIL_BYTES = 65536  # enough of the end to hold a workbook's zip directory


def detect(head: bytes, tail: bytes | None = None, name: str = "") -> str:
    """The name of the kind (`kinds.KINDS`) of a file starting with `head` (its first
    HEAD_BYTES, or all of it) and ending with `tail` (its last TAIL_BYTES; None when not at
    hand, as for a stream). Raises CardError, saying why, for bytes that are no data file
    we can read."""
    binary = by_magic(head)
    if binary is None:
        if what := refused(head):
            raise CardError(f"Skipped {name}: it is {what}, not a data file. {takes()}.")
        return _text_kind(head, name)
    if binary.name == "xlsx":
        return _zip_kind(head, tail, name)
    if binary.name == "parquet" and tail is not None and not tail.endswith(b"PAR1"):
        raise CardError(f"Skipped {name}: it starts like Parquet but does not end like it.")
    return binary.name


def _text_kind(head: bytes, name: str) -> str:
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        head = head.decode("utf-16", "replace").encode()
    if b"\x00" in head:
        raise CardError(f"Skipped {name}: it is binary, not text data. {takes()}.")
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith((b"<!doctype html", b"<html")):
        raise CardError(f"Skipped {name}: it is a web page, not data.")
    if text.startswith(b"<?xml"):
        raise CardError(f"Skipped {name}: it is XML, not CSV or JSON.")
    found, hint = guess_kind(head, name), claimed(name)
    if text and hint is not None and hint.name in JSON_KINDS and found not in JSON_KINDS:
        raise CardError(f"Skipped {name}: it does not start like JSON.")  # broken JSON
    return found


def _zip_kind(head: bytes, tail: bytes | None, name: str) -> str:
    names = zip_names(tail) if tail is not None else None
    if names is None:  # no directory at hand: go by the first entries
        names = _local_names(head)
        if "[Content_Types].xml" in names or any(n.startswith("xl/") for n in names):
            return "xlsx"
    elif "[Content_Types].xml" in names and "xl/workbook.xml" in names:
        return "xlsx"
    for entry, what in OTHER_ZIPS.items():
        if entry in names:
            raise CardError(f"Skipped {name}: it is {what}, not a workbook or data file.")
    raise CardError(f"Skipped {name}: it is a zip archive, not an Excel workbook. {takes()}.")


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
