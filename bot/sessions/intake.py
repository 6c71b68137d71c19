"""What a file is, recognised by its content, and how it reaches the sandbox.

Text data (CSV, TSV, JSON, JSON Lines) streams through, profiled into a data card on the
way. A gzip'ed file is unpacked as it streams (with a ratio and size cap) and saved
unpacked. Workbooks and Parquet files are spooled first: their directory or footer is at
the end, and they are checked (zip bombs, a Parquet file cut short) and profiled from the
spooled copy before any byte reaches the sandbox.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bot.datacard import CardError, DataCard, detect, gunzip
from bot.datacard.detect import HEAD_BYTES
from bot.datacard.kinds import kind as kind_row
from bot.datacard.kinds import unpacked_name
from bot.datacard.whole import card_file


@dataclass(frozen=True)
class Prepared:
    """A file ready to take in: the name it is saved under, its kind, and its bytes."""

    name: str
    kind: str  # a kind of `kinds.KINDS` taken as it is: never gzip
    chunks: AsyncIterator[bytes]

    @property
    def spooled(self) -> bool:
        return kind_row(self.kind).intake == "spool"


async def prepare(name: str, chunks: AsyncIterator[bytes]) -> Prepared:
    """Tell the file's kind by its first bytes; a gzip'ed file is unpacked on the way and
    loses its `.gz`. Raises CardError (a BotError saying why) for anything else."""
    head, chunks = await peek(chunks, HEAD_BYTES)
    kind = detect(head, None, name)
    if kind_row(kind).intake != "unpack":
        return Prepared(name, kind, chunks)
    inner_name = unpacked_name(name)
    head, inner = await peek(gunzip(chunks, name), HEAD_BYTES)
    inner_kind = kind_row(detect(head, None, inner_name))
    if inner_kind.intake != "stream":  # one layer of gzip, of text
        raise CardError(
            f"Skipped {name}: it holds {inner_kind.label} data; send CSV or TSV in gzip."
        )
    return Prepared(inner_name, inner_kind.name, inner)


async def card_spooled(kind: str, path: Path, name: str) -> list[DataCard]:
    """Check a spooled workbook or Parquet file and profile it, in the cards' own threads."""
    return await card_file(kind, path, name)


async def peek(chunks: AsyncIterator[bytes], size: int) -> tuple[bytes, AsyncIterator[bytes]]:
    """The first `size` bytes (fewer if the stream is shorter), and the whole stream again."""
    taken: list[bytes] = []
    have = 0
    async for chunk in chunks:
        taken.append(chunk)
        have += len(chunk)
        if have >= size:
            break
    return b"".join(taken)[:size], _replay(taken, chunks, have >= size)


async def _replay(
    taken: list[bytes], rest: AsyncIterator[bytes], more: bool
) -> AsyncIterator[bytes]:
    for chunk in taken:
        yield chunk
    if more:
        async for chunk in rest:
            yield chunk
