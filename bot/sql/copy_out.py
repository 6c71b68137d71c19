"""PostgreSQL's fast path: the server writes the CSV itself (`COPY (query) TO STDOUT`, in
the same read-only transaction), and the bot passes the bytes on, counting records for the
row cap and cutting at a record's end for the caps. About as fast as `psql \\copy`; a
row-by-row cursor spends most of its time making Python objects of every value.

The model's query goes inside the COPY only when the whole statement reads back as one
COPY of one query to STDOUT (what a query cannot break out of); otherwise the cursor path
runs it (EXPLAIN, for one).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import itertools
import logging
from collections.abc import AsyncIterator
from typing import Any

import sqlglot
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.sql.config import ConnectionSpec
from bot.sql.csv_records import record_span
from bot.sql.engines import begin_read_only, end_read_only

HEAD_BYTES = 256 << 10  # the start of the file, kept for the columns and the preview
QUEUE_CHUNKS = 8  # chunks between the server and the sandbox: memory stays flat


def copy_of(sql: str) -> str | None:
    """The query as asyncpg sends it inside COPY (newlines keep a trailing comment from
    swallowing the closing parenthesis), or None where the COPY would not read back as
    one COPY of one query to STDOUT."""
    inner = f"\n{sql}\n"
    logger = logging.getLogger("sqlglot")
    level, logger.level = logger.level, logging.ERROR
    try:
        trees = sqlglot.parse(f"COPY ({inner}) TO STDOUT", read="postgres")
    except SqlglotError:
        return None
    finally:
        logger.setLevel(level)
    if len(trees) != 1 or not isinstance(copy := trees[0], exp.Copy) or copy.args.get("kind"):
        return None
    files = copy.args.get("files") or []
    target = [f.name.upper() for f in files if isinstance(f, exp.Identifier)]
    query = copy.this.this if isinstance(copy.this, exp.Subquery) else None
    if target != ["STDOUT"] or len(files) != 1 or not isinstance(query, exp.Query):
        return None
    return inner


class CopySource:
    """A COPY running on a connection of its own, its chunks queued for the reader."""

    def __init__(self, conn: AsyncConnection, transaction: Any, task: asyncio.Task[str]) -> None:
        self._conn, self._transaction, self._task = conn, transaction, task
        self._head = b""
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(QUEUE_CHUNKS)

    @classmethod
    async def open(cls, engine: AsyncEngine, inner: str, spec: ConnectionSpec) -> CopySource:
        conn, transaction = await begin_read_only(engine, spec)
        try:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None
        except BaseException:
            await asyncio.shield(conn.close())
            raise
        source: CopySource

        async def sink(data: bytes) -> None:
            await source.queue.put(data)

        task = asyncio.ensure_future(
            driver.copy_from_query(inner, output=sink, format="csv", header=True)
        )
        source = cls(conn, transaction, task)
        try:
            await source._first()
        except BaseException:
            await source.close()
            raise
        return source

    async def _first(self) -> None:
        """Wait for the first chunk (the header) or the COPY's end: a statement the server
        refuses raises here, before any file is made."""
        getter = asyncio.ensure_future(self.queue.get())
        await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            self._head = getter.result()
            return
        getter.cancel()
        self._task.result()  # the server's refusal, raised
        self._head = b""

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._head:
            yield self._head
        while True:
            if self._task.done() and self.queue.empty():
                self._task.result()  # a failure part-way, raised
                return
            getter = asyncio.ensure_future(self.queue.get())
            await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()

    async def close(self) -> None:
        """Stop the COPY if it still runs (asyncpg cancels it on the server), roll back."""
        if not self._task.done():
            self._task.cancel()
            while not self.queue.empty():  # a sink waiting on a full queue can finish
                self.queue.get_nowait()
        with contextlib.suppress(BaseException):
            await self._task
        await end_read_only(self._conn, self._transaction)


class CsvCaps:
    """Passes CSV bytes (a header line first) through the row and byte caps: whole records
    only, a partial one held until its end comes. Keeps the start of the file for the
    columns and the preview."""

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        self._max_rows, self._max_bytes = max_rows, max_bytes
        self._carry = b""  # the start of a record whose end has not come yet
        self.records = 0  # the header included
        self.bytes = 0
        self.capped = ""
        self.head = bytearray()

    def take(self, chunk: bytes) -> bytes:
        """The whole records that `chunk` completes, within the caps; once a cap cuts,
        `capped` says which, and nothing more is taken."""
        if self.capped or not chunk:
            return b""
        left = self._max_rows + 1 - self.records
        if left == 0:  # exactly max_rows rows were taken, and more came
            self.capped = f"the row cap of {self._max_rows:,}"
            return b""
        data = self._carry + chunk
        room = self._max_bytes - self.bytes
        count, end = record_span(data, min(room, len(data)), left)
        self.records += count
        self._carry = data[end:]
        if count == left and self._carry:
            self.capped = f"the row cap of {self._max_rows:,}"
        elif len(data) > room and len(self._carry) > room - end:
            self.capped = f"the size cap of {self._max_bytes:,} bytes"
        return self._kept(data[:end])

    def rest(self) -> bytes:
        """At the end of the stream: a last record without its newline, if it fits."""
        tail, self._carry = self._carry, b""
        if self.capped or not tail or self.bytes + len(tail) > self._max_bytes:
            return b""
        if self.records == self._max_rows + 1:
            self.capped = f"the row cap of {self._max_rows:,}"
            return b""
        self.records += 1
        return self._kept(tail)

    def _kept(self, kept: bytes) -> bytes:
        self.bytes += len(kept)
        if len(self.head) < HEAD_BYTES:
            self.head += kept[: HEAD_BYTES - len(self.head)]
        return kept

    def table(self, preview_rows: int) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The columns and the first rows, read back from the start of the file."""
        whole = len(self.head) == self.bytes
        text = self.head.decode("utf-8", errors="replace")
        rows = list(itertools.islice(csv.reader(io.StringIO(text)), preview_rows + 2))
        if not whole and len(rows) <= preview_rows + 1 and rows:
            rows.pop()  # the kept start may end within the last of these records
        columns = rows[0] if rows else []
        return columns, [tuple(r) for r in rows[1 : preview_rows + 1]]
