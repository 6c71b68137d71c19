"""One pass over a text data file (CSV, TSV, JSON, JSON Lines), in bounded memory.

`feed` takes the bytes in any chunking; work happens on fixed blocks of `block_size` bytes
from the start of the file, so the card does not depend on how the bytes arrived. Pure and
synchronous: callers on an event loop run it in a worker thread (see stream.CardTap)."""

from __future__ import annotations

import codecs
from collections import deque
from typing import Protocol

from bot.datacard.budget import check
from bot.datacard.card import DataCard
from bot.datacard.csvprof import LINE_CAP, SNIFF, CsvEngine
from bot.datacard.jsonprof import JsonEngine, JsonLinesEngine
from bot.datacard.kinds import guess_kind

BLOCK = 1 << 20
Pieces = list[bytes | memoryview]


class Engine(Protocol):
    def block(self, pieces: Pieces, final: bool) -> None: ...
    def card(self) -> DataCard: ...


class Profiler:
    def __init__(self, name: str = "", kind: str | None = None, block_size: int = BLOCK) -> None:
        """`kind` (csv, tsv, json, jsonl) skips the guess from the first bytes."""
        self.name, self.kind, self.block_size = name, kind, block_size
        self.size = 0
        self._head = bytearray()  # the bytes before the engine starts
        self._pieces: deque[bytes | memoryview] = deque()  # bytes not yet in a block
        self._held = 0
        self._encoding: str | None = None  # known from a byte order mark
        self._label: str | None = None  # the encoding as the card names it
        self._utf16: codecs.IncrementalDecoder | None = None
        self._engine: Engine | None = None
        self._started = False  # the byte order mark, if any, is dealt with

    def feed(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._utf16 is not None:
            chunk = self._utf16.decode(chunk).encode("utf-8")
        if self._engine is not None:
            self._hold(chunk)
            return
        self._head += chunk
        if not self._started and len(self._head) >= 4:
            self._bom()
        if self._started and self._sniffable():
            self._engine = self._start(whole=False)
            self._hold(bytes(self._head))
            self._head = bytearray()

    def finish(self) -> DataCard:
        if self._engine is None:
            if not self._started:
                self._bom()
            if self._utf16 is not None:
                self._head += self._utf16.decode(b"", final=True).encode("utf-8")
            self._engine = self._start(whole=True)
            self._hold(bytes(self._head))
        check()
        self._engine.block(list(self._pieces), final=True)
        self._pieces.clear()
        card = self._engine.card()
        card.name, card.size = self.name, self.size
        card.encoding = self._label or card.encoding
        return card

    def _hold(self, chunk: bytes) -> None:
        """Keep `chunk` (not a copy) and hand every whole block to the engine."""
        assert self._engine is not None
        if chunk:
            self._pieces.append(chunk)
            self._held += len(chunk)
        while self._held >= self.block_size:
            check()  # a card past its time budget stops here, between blocks
            self._engine.block(self._take(self.block_size), final=False)

    def _take(self, size: int) -> Pieces:
        out: Pieces = []
        self._held -= size
        while size:
            piece = self._pieces.popleft()
            if len(piece) > size:
                view = memoryview(piece)
                piece, rest = view[:size], view[size:]
                self._pieces.appendleft(rest)
            out.append(piece)
            size -= len(piece)
        return out

    def _bom(self) -> None:
        self._started = True
        head = bytes(self._head[:4])
        if head.startswith(codecs.BOM_UTF8):
            del self._head[:3]
            self._encoding, self._label = "utf-8", "utf-8 with BOM"
        elif head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            self._utf16 = codecs.getincrementaldecoder("utf-16")()
            self._head = bytearray(self._utf16.decode(bytes(self._head)).encode("utf-8"))
            self._encoding, self._label = "utf-8", "utf-16"

    def _sniffable(self) -> bool:
        """Enough bytes to guess from: 64 KB and a whole first line (or the line cap)."""
        size = len(self._head)
        return size >= LINE_CAP or (size >= SNIFF and self._head.find(b"\n") >= 0)

    def _start(self, whole: bool) -> Engine:
        head = bytes(self._head[: max(SNIFF, self._head.find(b"\n") + 1)])
        kind = self.kind or guess_kind(head, self.name)
        if kind == "json":
            return JsonEngine(self._encoding)
        if kind == "jsonl":
            return JsonLinesEngine(self._encoding)
        return CsvEngine(head, self.name, self._encoding, whole, tsv=kind == "tsv")
