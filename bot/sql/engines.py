"""The second read-only check: each engine opened so that it cannot write, whatever the
statement. SQLAlchemy is the one seam. PostgreSQL goes through its async engine (asyncpg);
the embedded files and the warehouses' dialects, which are synchronous, run on a thread of
their own per query (`query`).

- PostgreSQL: a fresh connection per query (no session state carried over), the bot's own
  `BEGIN READ ONLY`, statement, lock and idle timeouts, and always a rollback.
- SQLite: opened `mode=ro`, with an authorizer refusing ATTACH, PRAGMA and the functions
  that reach files, no attached databases, and a deadline in its progress handler.
- DuckDB: opened read-only, with no extension loading, no external access (files, the
  network), and its configuration locked.
- MySQL, Snowflake, BigQuery: the session's read-only mode and timeout, or the scan cap,
  where the dialect offers one.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from bot.sql.config import ConnectionSpec

APPLICATION = "slack-code-interpreter"
LOCK_TIMEOUT_MS = 5_000
SQLITE_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "fts3_tokenizer", "edit"}
DUCKDB_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}


def async_engine(spec: ConnectionSpec) -> AsyncEngine:
    """PostgreSQL through asyncpg, its timeouts set at connect time as well (a default the
    bot's own SET LOCAL repeats inside every transaction)."""
    ms = str(int(spec.timeout_s * 1000))
    settings = {
        "statement_timeout": ms,
        "lock_timeout": str(min(LOCK_TIMEOUT_MS, int(ms))),
        "idle_in_transaction_session_timeout": str(int(ms) + 10_000),
        "default_transaction_read_only": "on",
        "application_name": APPLICATION,
    }
    return create_async_engine(
        spec.url.set(drivername="postgresql+asyncpg"),
        poolclass=NullPool,
        hide_parameters=True,
        connect_args={"server_settings": settings, "timeout": min(spec.timeout_s, 15)},
    )


async def begin_read_only(engine: AsyncEngine, spec: ConnectionSpec) -> tuple[Any, Any]:
    """A fresh connection in a read-only transaction the bot opened, with the statement
    timeout set inside it: (connection, transaction). Closed again if that fails."""
    conn = await engine.connect()
    try:
        await conn.execution_options(postgresql_readonly=True)
        transaction = await conn.begin()
        await conn.exec_driver_sql(f"SET LOCAL statement_timeout = {int(spec.timeout_s * 1000)}")
    except BaseException:
        await asyncio.shield(conn.close())
        raise
    return conn, transaction


async def end_read_only(conn: Any, transaction: Any) -> None:
    """Roll the transaction back (always) and close the connection; a connection the server
    dropped has nothing left to roll back."""
    try:
        await transaction.rollback()
    except Exception:  # the connection is gone: closing it is all that is left
        pass
    finally:
        await conn.close()


def sync_engine(spec: ConnectionSpec) -> Engine:
    """Every other family: an engine whose connections are read-only as far as it goes."""
    if spec.family == "sqlite":
        return _sqlite(spec)
    if spec.family == "duckdb":
        return _duckdb(spec)
    url, connect_args = spec.url, _session_limits(spec)
    if url.drivername == "mysql":
        url = url.set(drivername="mysql+pymysql")  # the driver the extra installs
    if spec.family == "bigquery" and spec.max_bytes_billed:
        url = url.update_query_dict({"maximum_bytes_billed": str(spec.max_bytes_billed)})
    return create_engine(url, poolclass=NullPool, hide_parameters=True, connect_args=connect_args)


def _session_limits(spec: ConnectionSpec) -> dict[str, Any]:
    seconds = max(1, int(spec.timeout_s))
    if spec.family == "mysql":
        ms = seconds * 1000
        init = f"SET SESSION TRANSACTION READ ONLY, SESSION max_execution_time = {ms}"
        return {"init_command": init, "read_timeout": seconds + 5}
    if spec.family == "snowflake":
        return {"session_parameters": {"STATEMENT_TIMEOUT_IN_SECONDS": seconds}}
    return {}


def _sqlite(spec: ConnectionSpec) -> Engine:
    """Read-only by the file's open mode; the model's queries are locked down further
    (`sqlite_for_query`): the bot's own table listing needs PRAGMA."""
    path = quote(str(spec.url.database), safe="/")
    return create_engine(
        f"sqlite:///file:{path}?mode=ro&uri=true", poolclass=NullPool, hide_parameters=True
    )


def sqlite_for_query(dbapi_connection: sqlite3.Connection, timeout_s: float) -> None:
    """Before a model's query: no ATTACH, PRAGMA or file functions, no attached databases,
    and, as SQLite has no statement timeout, a deadline in its progress handler."""
    dbapi_connection.set_authorizer(_sqlite_authorizer)
    dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    deadline = time.monotonic() + timeout_s
    dbapi_connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)


def _sqlite_authorizer(action: int, arg1: Any, arg2: Any, _db: Any, _source: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_PRAGMA, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in SQLITE_DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _duckdb(spec: ConnectionSpec) -> Engine:
    engine = create_engine(
        URL.create("duckdb", database=spec.url.database),
        poolclass=NullPool,
        connect_args={"read_only": True, "config": dict(DUCKDB_CONFIG)},
    )

    @event.listens_for(engine, "connect")
    def lock_down(dbapi_connection: Any, _record: Any) -> None:
        # Connections to one file share its database, whose configuration stays locked
        # while any of them is open: a second connection finds it locked already.
        locked = "SELECT current_setting('lock_configuration')"
        if dbapi_connection.execute(locked).fetchone()[0]:
            return
        for setting in ("enable_external_access = false", "lock_configuration = true"):
            dbapi_connection.execute(f"SET {setting}")

    return engine


def interrupter(family: str, dbapi_connection: Any) -> Callable[[], None] | None:
    """How to stop a running query from another thread, where the driver can."""
    if family in ("sqlite", "duckdb"):
        return getattr(dbapi_connection, "interrupt", None)
    return None
