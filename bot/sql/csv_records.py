"""Whole records at the start of CSV bytes: a newline ends a record unless it is inside
quotes, and every quote (a doubled one included) flips whether we are inside. Bytes
without a quote, the common case, are counted at C speed."""

from __future__ import annotations

QUOTE, NEWLINE = b'"', b"\n"


def record_span(data: bytes, room: int, limit: int) -> tuple[int, int]:
    """(records, end): how many whole records, at most `limit`, lie within the first
    `room` bytes of `data` (which starts at a record's start), and the offset just past
    the last of them."""
    if QUOTE not in data[:room]:
        count = data.count(NEWLINE, 0, room)
        if count <= limit:
            return count, data.rfind(NEWLINE, 0, room) + 1
    count, start, quoted, end = 0, 0, False, 0
    while count < limit:
        newline = data.find(NEWLINE, start, room)
        if newline < 0:
            break
        quoted ^= data.count(QUOTE, start, newline) % 2 == 1
        start = newline + 1
        if not quoted:
            count, end = count + 1, start
    return count, end
