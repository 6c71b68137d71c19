"""One query, streamed: rows leave the database in batches and become CSV bytes, up to the
connection's row and byte caps, so the bot holds one batch at a time however large the
result. The whole query, stream included, runs within the connection's timeout (a server's
statement timeout does not bound a stream's later fetches).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.errors import BotError
from bot.sql.config import ConnectionSpec
from bot.sql.copy_out import CopySource, CsvCaps, copy_of
from bot.sql.engines import begin_read_only, end_read_only, interrupter, sqlite_for_query

BATCH_ROWS = 2_000
# `:name` is a bind parameter to text(), even inside a string literal; the model's SQL has
# none, so every such colon is escaped (`::` casts are left alone).
BIND = re.compile(r"(?<![:\w\\]):(?=\w)")


class QueryFailed(BotError):
    """The database refused or lost the query; the message says why, without secrets."""

    def __init__(self, message: str, *, lost: bool = False) -> None:
        super().__init__(message)
        self.lost = lost  # the connection went away (the server stopped, the network)


LOST = ("connection is closed", "connection was closed", "connection refused", "terminating")


@dataclass
class QueryResult:
    columns: list[str]
    rows: int = 0
    capped: str = ""  # why the rows stopped short ("" when the result is whole)
    bytes: int = 0
    preview: list[tuple[Any, ...]] = field(default_factory=list)
    duration_s: float = 0.0


class _Source(Protocol):
    columns: list[str]

    async def fetch(self, n: int) -> Sequence[Sequence[Any]]: ...
    async def close(self) -> None: ...


async def open_query(spec: ConnectionSpec, engine: AsyncEngine | Engine, sql: str) -> QueryStream:
    """Run `sql` and hold its first rows; the rest come as `QueryStream.csv()` is read.
    A statement the database refuses raises QueryFailed here, before any file is made."""
    statement = text(BIND.sub(r"\\:", sql))
    started = time.monotonic()
    try:
        if isinstance(engine, AsyncEngine) and (inner := copy_of(sql)) is not None:
            copied = await CopySource.open(engine, inner, spec)
            return QueryStream(spec, copied, started)
        if isinstance(engine, AsyncEngine):
            source: _Source = await _AsyncSource.open(engine, statement, spec)
        else:
            source = await _ThreadSource.open(engine, statement, spec)
    except Exception as exc:  # the database's boundary: whatever it raised, said in a line
        raise QueryFailed(describe(exc), lost=connection_lost(exc)) from None
    return QueryStream(spec, source, started)


class QueryStream:
    """The rows of an opened query as CSV bytes; `result` is whole once they are read."""

    def __init__(self, spec: ConnectionSpec, source: _Source | CopySource, started: float) -> None:
        self._spec = spec
        self._source = source
        self._started = started
        columns = [] if isinstance(source, CopySource) else list(source.columns)
        self.result = QueryResult(columns=columns)
        self.error: str = ""  # what cut the stream short, if the database did

    async def csv(self) -> AsyncIterator[bytes]:
        """The header, then the rows in chunks, until they, a cap or an error end."""
        if isinstance(self._source, CopySource):
            chunks = self._copied(self._source)
        else:
            chunks = self._written(self._source)
        async for chunk in chunks:
            yield chunk
        self.result.duration_s = time.monotonic() - self._started

    async def _copied(self, source: CopySource) -> AsyncIterator[bytes]:
        """The server's CSV, through the caps."""
        caps = CsvCaps(self._spec.max_rows, self._spec.max_bytes)
        try:
            async for chunk in source.chunks():
                if kept := caps.take(chunk):
                    yield kept
                if caps.capped:
                    break
            if tail := caps.rest():
                yield tail
        except Exception as exc:  # the database's boundary, as below
            self.error = describe(exc)
        result = self.result
        result.rows, result.bytes, result.capped = max(0, caps.records - 1), caps.bytes, caps.capped
        result.columns, result.preview = caps.table(self._spec.preview_rows)

    async def _written(self, source: _Source) -> AsyncIterator[bytes]:
        """Rows fetched in batches, written as CSV here."""
        result, spec = self.result, self._spec
        out, buffer = _writer()
        out.writerow(result.columns)
        while True:
            want = min(BATCH_ROWS, spec.max_rows - result.rows + 1)
            try:
                batch = await source.fetch(want)
            except Exception as exc:  # as above; the file so far is removed by the caller
                self.error = describe(exc)
                break
            if not batch:
                break
            if result.rows + len(batch) > spec.max_rows:
                batch = batch[: spec.max_rows - result.rows]
                result.capped = f"the row cap of {spec.max_rows:,}"
            room = spec.preview_rows - len(result.preview)
            result.preview += [tuple(row) for row in batch[: max(0, room)]]
            out.writerows(batch)
            chunk = buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
            if result.bytes + len(chunk) > spec.max_bytes:
                result.capped = f"the size cap of {spec.max_bytes:,} bytes"
                break
            result.rows += len(batch)
            result.bytes += len(chunk)
            yield chunk
            if result.capped:
                break
        if tail := buffer.getvalue().encode():  # only the header, for an empty result
            result.bytes += len(tail)
            yield tail

    async def close(self) -> None:
        """End the transaction (always a rollback) and the connection."""
        await asyncio.shield(self._source.close())


def _writer() -> tuple[Any, io.StringIO]:
    buffer = io.StringIO()
    return csv.writer(buffer, lineterminator="\n"), buffer


class _AsyncSource:
    """PostgreSQL: a server-side cursor in a read-only transaction the bot opened."""

    def __init__(self, conn: Any, transaction: Any, result: Any) -> None:
        self._conn, self._transaction, self._result = conn, transaction, result
        self.columns = list(result.keys())

    @classmethod
    async def open(cls, engine: AsyncEngine, statement: Any, spec: ConnectionSpec) -> _AsyncSource:
        conn, transaction = await begin_read_only(engine, spec)
        try:
            result = await conn.stream(statement, execution_options={"yield_per": BATCH_ROWS})
        except BaseException:
            await asyncio.shield(conn.close())
            raise
        return cls(conn, transaction, result)

    async def fetch(self, n: int) -> Sequence[Sequence[Any]]:
        return list(await self._result.fetchmany(n))

    async def close(self) -> None:
        with contextlib.suppress(Exception):  # a dropped connection's cursor is gone too
            await self._result.close()
        await end_read_only(self._conn, self._transaction)


class _ThreadSource:
    """A synchronous driver on one thread of its own: every call of the query on it."""

    def __init__(self, pool: ThreadPoolExecutor, conn: Any, result: Any, stop: Any) -> None:
        self._pool, self._conn, self._result, self._stop = pool, conn, result, stop
        self.columns = list(result.keys())

    @classmethod
    async def open(cls, engine: Engine, statement: Any, spec: ConnectionSpec) -> _ThreadSource:
        pool = ThreadPoolExecutor(1, thread_name_prefix=f"sql-{spec.name}")
        loop = asyncio.get_running_loop()
        stops: list[Callable[[], None]] = []  # how to interrupt the statement once it runs

        def start() -> tuple[Any, Any, Any]:
            conn = engine.connect()
            try:
                raw = conn.connection.dbapi_connection
                if (stop := interrupter(spec.family, raw)) is not None:
                    stops.append(stop)
                if isinstance(raw, sqlite3.Connection):
                    sqlite_for_query(raw, spec.timeout_s)
                conn.begin()
                options = {"yield_per": BATCH_ROWS}
                return conn, conn.execution_options(**options).execute(statement), raw
            except BaseException:
                conn.close()
                raise

        try:
            conn, result, raw = await _on(loop, pool, start)
        except asyncio.CancelledError:
            for stop in stops:  # the timeout, while the statement runs on the thread
                with contextlib.suppress(Exception):
                    stop()
            pool.shutdown(wait=False)
            raise
        except BaseException:
            pool.shutdown(wait=False)
            raise
        return cls(pool, conn, result, interrupter(spec.family, raw))

    async def fetch(self, n: int) -> Sequence[Sequence[Any]]:
        rows: Sequence[Sequence[Any]] = await _on(
            asyncio.get_running_loop(), self._pool, self._result.fetchmany, n
        )
        return rows

    async def close(self) -> None:
        if self._stop is not None:
            self._stop()  # a fetch still running on the thread ends now

        def end() -> None:
            try:
                self._conn.rollback()
            except Exception:  # as for PostgreSQL: nothing left to roll back
                pass
            finally:
                self._conn.close()

        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, end)
        finally:
            self._pool.shutdown(wait=False)


async def _on(
    loop: asyncio.AbstractEventLoop, pool: ThreadPoolExecutor, fn: Any, *args: Any
) -> Any:
    """`fn` on the query's thread; cancelled, the thread is interrupted by `close`."""
    return await loop.run_in_executor(pool, fn, *args)


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the connection went away, rather than the query being refused."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(exc, OSError):
        return True
    return any(words in str(exc).lower() for words in LOST)


def describe(exc: BaseException) -> str:
    """A database error in a line or two: the driver's message, not SQLAlchemy's wrapping
    (which repeats the statement and its parameters)."""
    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    message = str(inner).strip() or type(inner).__name__
    lines = [line for line in message.splitlines() if line.strip()][:3]
    return f"{type(inner).__name__}: {' '.join(lines)}"[:600]
