"""A reader for the Thrift compact protocol, enough for Parquet's footer: every struct comes
back as {field id: value}, nested as deep as the data goes (within a limit)."""

from __future__ import annotations

import struct
from typing import Any

from bot.datacard.budget import check
from bot.datacard.errors import CardError

MAX_DEPTH = 32
# Values read, at most. A real footer has a few per column and row group; a hostile one
# packs a value in each byte (an empty struct) to cost a Python object per byte.
MAX_VALUES = 100_000
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12


class TooLarge(CardError):
    """More values than MAX_VALUES; `CompactReader.top` holds the fields read before."""


class CompactReader:
    def __init__(self, data: bytes, what: str = "the file") -> None:
        self.data, self.pos, self.what = data, 0, what
        self.values = 0
        self.top: dict[int, Any] = {}  # the outermost struct's fields, as far as read

    def struct(self, depth: int = 0) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        if depth == 0:
            self.top = fields
        last = 0
        while (head := self._byte()) != _STOP:
            kind, delta = head & 0x0F, head >> 4
            last = last + delta if delta else _zigzag(self._varint())
            if kind in (_TRUE, _FALSE):
                fields[last] = kind == _TRUE
            else:
                fields[last] = self._value(kind, depth)
        return fields

    def _value(self, kind: int, depth: int) -> Any:
        self.values += 1
        if self.values > MAX_VALUES:
            raise TooLarge(
                f"Skipped {self.what}: its Parquet metadata is too large to read "
                f"(over {MAX_VALUES:,} values)."
            )
        if not self.values % 65536:
            check()
        if depth > MAX_DEPTH:
            self._fail("nested too deeply")
        if kind == _BYTE:
            return struct.unpack("<b", self._take(1))[0]
        if kind in (_I16, _I32, _I64):
            return _zigzag(self._varint())
        if kind == _DOUBLE:
            return struct.unpack("<d", self._take(8))[0]
        if kind == _BINARY:
            return self._take(self._varint())
        if kind in (_LIST, _SET):
            head = self._byte()
            size, item = head >> 4, head & 0x0F
            if size == 15:
                size = self._varint()
            self._room(size)
            if item in (_TRUE, _FALSE):  # a boolean in a list is a whole byte
                return [self._byte() == _TRUE for _ in range(size)]
            return [self._value(item, depth + 1) for _ in range(size)]
        if kind == _MAP:
            size = self._varint()
            if not size:
                return {}
            self._room(size * 2)
            types = self._byte()
            return {
                self._value(types >> 4, depth + 1): self._value(types & 0x0F, depth + 1)
                for _ in range(size)
            }
        if kind == _STRUCT:
            return self.struct(depth + 1)
        return self._fail(f"an unknown field type {kind}")

    def _varint(self) -> int:
        value = shift = 0
        while True:
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
            if shift > 70:
                self._fail("a number too long")

    def _byte(self) -> int:
        if self.pos >= len(self.data):
            self._fail("cut short")
        self.pos += 1
        return self.data[self.pos - 1]

    def _take(self, size: int) -> bytes:
        self._room(size)
        self.pos += size
        return self.data[self.pos - size : self.pos]

    def _room(self, size: int) -> None:
        if size < 0 or self.pos + size > len(self.data):
            self._fail("cut short")

    def _fail(self, why: str) -> Any:
        raise CardError(f"Skipped {self.what}: its Parquet metadata is malformed ({why}).")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)
