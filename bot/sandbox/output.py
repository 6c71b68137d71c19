"""Bounded capture of a process's output: keep the head and the tail, count what was cut.

Shared by the sandbox backends so a snippet printing gigabytes costs the bot at most
`limit` bytes per stream. `last_line` turns a helper's captured stderr into a short message.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from bot.sandbox.base import Output

READ_CHUNK = 64 * 1024
CUT_MARKER = "\n[... {n} bytes cut ...]\n"
MESSAGE_MAX_CHARS = 200


class Sink(Protocol):
    """Where a reader puts a stream's bytes (a CappedBuffer, or a parser of what they say)."""

    def write(self, data: bytes) -> None: ...

    def skip(self, n: int) -> None:
        """`n` bytes that had to be dropped."""
        ...


class CappedBuffer:
    """Keeps the first `limit // 2` bytes and the last `limit - limit // 2` bytes written."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        self._head_cap = limit // 2
        self._tail_cap = limit - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        view = memoryview(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += view[:room]
            view = view[room:]
        if not view or not self._tail_cap:
            return
        self._tail += view[-self._tail_cap :]
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            del self._tail[:excess]

    def skip(self, n: int) -> None:
        """Count `n` bytes as written and cut (a sender that capped its output already)."""
        self.total += n

    @property
    def cut_bytes(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    def output(self) -> Output:
        """Decode as UTF-8 (bad bytes replaced); a cut never splits a character."""
        if not self.cut_bytes:
            return Output((self._head + self._tail).decode("utf-8", errors="replace"))
        head = _trim_partial_end(bytes(self._head))
        tail = _trim_partial_start(bytes(self._tail))
        cut = self.total - len(head) - len(tail)
        text = (
            head.decode("utf-8", errors="replace")
            + CUT_MARKER.format(n=cut)
            + tail.decode("utf-8", errors="replace")
        )
        return Output(text, cut)


async def pump(stream: asyncio.StreamReader, buffer: CappedBuffer) -> None:
    """Copy a stream into `buffer` until EOF."""
    while chunk := await stream.read(READ_CHUNK):
        buffer.write(chunk)


def last_line(raw: str | bytes) -> str:
    """The last line of `raw`, stripped and cut to MESSAGE_MAX_CHARS ("" if blank)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    lines = text.strip().splitlines()
    return lines[-1].strip()[:MESSAGE_MAX_CHARS] if lines else ""


def _trim_partial_end(data: bytes) -> bytes:
    """Drop an incomplete UTF-8 sequence at the end (at most 3 bytes)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: keep looking for the character's lead byte
        needed = 4 if byte >= 0xF0 else 3 if byte >= 0xE0 else 2 if byte >= 0xC0 else 1
        return data[:-back] if back < needed else data
    return data


def _trim_partial_start(data: bytes) -> bytes:
    """Drop continuation bytes left at the start by the cut (at most 3)."""
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return data[skip:]
