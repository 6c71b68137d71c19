"""The SQLite store: one file, one connection, used from one worker thread.

Durability choices:
- WAL journal: a commit is one append to the `-wal` file, and after a crash the frames of a
  transaction that never wrote its commit frame are ignored, so a killed write leaves no trace.
- synchronous=FULL: the WAL is synced on every commit, so a commit the bot acted on (a sandbox
  made, a reply posted) survives a power loss or host crash too, not just a killed process.
  NORMAL syncs only at checkpoints and may lose the last commits then. The bot commits a few
  rows per model turn, seconds apart, so one sync per commit costs nothing that matters.
- One connection on one thread: calls are serialised in the order they were made, and the
  event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from bot.store.base import (
    RUN_OUTCOMES,
    SESSION_STATES,
    SESSION_UPDATABLE,
    FileRecord,
    NotFound,
    RunOutcome,
    RunRecord,
    SessionRecord,
    StoreError,
    ToolCallRecord,
)

T = TypeVar("T")
BUSY_TIMEOUT_MS = 5000  # another process holding the write lock (a CLI, a backup) is waited for

# The schema, one script per version, applied in order; PRAGMA user_version is the number of
# scripts applied. Append new scripts; never edit one that has shipped.
MIGRATIONS: tuple[str, ...] = (
    # 1: sessions, their conversations and their files: what a thread needs to resume.
    """
    CREATE TABLE sessions (
        key           TEXT PRIMARY KEY,  -- team:channel:thread_ts
        team          TEXT NOT NULL,
        channel       TEXT NOT NULL,
        thread_ts     TEXT NOT NULL,
        sandbox_id    TEXT,
        state         TEXT NOT NULL CHECK (state IN ('active', 'idle', 'closed')),
        repo_url      TEXT,
        created_at    REAL NOT NULL,     -- Unix time
        last_activity REAL NOT NULL
    );
    CREATE INDEX sessions_by_activity ON sessions (last_activity);

    CREATE TABLE history (
        key      TEXT PRIMARY KEY REFERENCES sessions (key) ON DELETE CASCADE,
        messages TEXT NOT NULL           -- JSON array, replaced whole on each save
    );

    CREATE TABLE files (
        id            INTEGER PRIMARY KEY,  -- the order taken in
        key           TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        slack_file_id TEXT NOT NULL,
        name          TEXT NOT NULL,
        size          INTEGER NOT NULL,
        sha256        TEXT NOT NULL,
        sandbox_path  TEXT NOT NULL,
        source        TEXT NOT NULL         -- JSON: the Slack file object, to fetch it again
    );
    CREATE INDEX files_by_key ON files (key);
    """,
    # 2: runs (one per question), the usage and cost of each model turn, and the tool calls.
    """
    CREATE TABLE runs (
        run_id     TEXT PRIMARY KEY,
        key        TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        question   TEXT NOT NULL,
        started_at REAL NOT NULL,
        ended_at   REAL,
        -- NULL while in flight, or when its process died before it could end it
        outcome    TEXT CHECK (outcome IN ('finished', 'failed', 'stopped', 'interrupted'))
    );
    CREATE INDEX runs_by_key ON runs (key);
    CREATE INDEX runs_unended ON runs (started_at) WHERE outcome IS NULL;

    CREATE TABLE turns (
        id       INTEGER PRIMARY KEY,
        key      TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        run_id   TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        usage    TEXT NOT NULL,          -- JSON: token counts by kind
        cost_usd REAL,                   -- NULL when the model's price is unknown
        at       REAL NOT NULL
    );
    CREATE INDEX turns_by_key ON turns (key);
    CREATE INDEX turns_by_run ON turns (run_id);

    CREATE TABLE tool_calls (
        id         INTEGER PRIMARY KEY,  -- the order recorded
        key        TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        call_id    TEXT NOT NULL,
        tool       TEXT NOT NULL,
        language   TEXT,
        code       TEXT NOT NULL,
        status     TEXT NOT NULL,
        exit_code  INTEGER,
        duration_s REAL NOT NULL,
        excerpt    TEXT NOT NULL,
        at         REAL NOT NULL
    );
    CREATE INDEX tool_calls_by_key ON tool_calls (key);
    CREATE INDEX tool_calls_by_run ON tool_calls (run_id);
    """,
    # 3: who asked for each run, for per-user budgets.
    """
    ALTER TABLE runs ADD COLUMN user TEXT NOT NULL DEFAULT '';
    CREATE INDEX runs_by_user ON runs (user, started_at);
    """,
)


def connect(path: Path) -> sqlite3.Connection:
    """A connection set up as the store uses it."""
    # isolation_level=None: no implicit transactions; every write goes through transaction().
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise StoreError(f"{path}: cannot use the WAL journal (got {mode!r})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Commit on success, roll back on any exception."""
    # IMMEDIATE takes the write lock up front: a write never fails half-way on a lock upgrade.
    conn.execute("BEGIN IMMEDIATE")
    with conn:
        yield conn


def schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def migrate(conn: sqlite3.Connection, migrations: Sequence[str] = MIGRATIONS) -> int:
    """Apply the missing migrations in order, each in one transaction with its version number."""
    if schema_version(conn) > len(migrations):
        raise StoreError(
            f"the database has schema version {schema_version(conn)}; "
            f"this code knows {len(migrations)}"
        )
    for version, script in enumerate(migrations, start=1):
        if schema_version(conn) >= version:
            continue
        with transaction(conn):
            # Checked again under the write lock: another process may have just done it.
            if schema_version(conn) >= version:
                continue
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version}")
    return schema_version(conn)


def _statements(script: str) -> Iterator[str]:
    """The script's statements, split at ';' outside strings, comments and triggers."""
    # Not executescript(): it commits first, so a migration could not be one transaction.
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if pending.strip(" \t\n;"):
                yield pending
            pending = ""


class SqliteStore:
    """The Store on a local SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None  # touched only on the worker thread
        self._executor: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        if self._executor is not None:
            raise StoreError("the store is already open")
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._connect)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._executor = executor

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            # Queued after every call already made, so those finish first.
            await asyncio.get_running_loop().run_in_executor(executor, self._disconnect)
        finally:
            executor.shutdown(wait=False)

    async def save_session(self, record: SessionRecord) -> None:
        _check(record.state, SESSION_STATES)
        await self._write(_save_session, record)

    async def get_session(self, key: str) -> SessionRecord | None:
        return await self._read(_get_session, key)

    async def list_sessions(self) -> list[SessionRecord]:
        return await self._read(_list_sessions)

    async def update_session(self, key: str, **fields: Any) -> None:
        if unknown := set(fields) - SESSION_UPDATABLE:
            raise TypeError(f"update_session cannot change {sorted(unknown)}")
        if "state" in fields:
            _check(fields["state"], SESSION_STATES)
        await self._write(_update_session, key, fields)

    async def save_history(self, key: str, messages: list[dict[str, Any]]) -> None:
        await self._write(_save_history, key, messages)

    async def load_history(self, key: str) -> list[dict[str, Any]]:
        return await self._read(_load_history, key)

    async def add_file(self, key: str, file: FileRecord) -> None:
        await self._write(_add_file, key, file)

    async def files(self, key: str) -> list[FileRecord]:
        return await self._read(_files, key)

    async def start_run(
        self, key: str, run_id: str, question: str, at: float, user: str = ""
    ) -> None:
        await self._write(_start_run, key, run_id, question, at, user)

    async def end_run(self, run_id: str, outcome: RunOutcome, at: float) -> None:
        _check(outcome, RUN_OUTCOMES)
        await self._write(_end_run, run_id, outcome, at)

    async def runs_in_flight(self) -> list[RunRecord]:
        return await self._read(_runs_in_flight)

    async def add_turn(
        self, key: str, run_id: str, usage: dict[str, int], cost_usd: float | None, at: float
    ) -> None:
        await self._write(_add_turn, key, run_id, usage, cost_usd, at)

    async def add_tool_call(self, key: str, call: ToolCallRecord) -> None:
        await self._write(_add_tool_call, key, call)

    async def tool_calls(self, key: str) -> list[ToolCallRecord]:
        return await self._read(_tool_calls, key)

    async def spent(
        self, *, key: str | None = None, user: str | None = None, since: float = 0.0
    ) -> float:
        return await self._read(_spent, key, user, since)

    # The worker thread.

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path)
        try:
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.execute("PRAGMA optimize")  # keeps the query planner's statistics fresh
            self._conn.close()
            self._conn = None

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._submit(functools.partial(self._call, fn, args, write=False))

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._submit(functools.partial(self._call, fn, args, write=True))

    async def _submit(self, job: Callable[[], T]) -> T:
        if self._executor is None:
            raise StoreError("the store is not open")
        # A cancelled caller stops waiting, but a write already queued still lands.
        return await asyncio.get_running_loop().run_in_executor(self._executor, job)

    def _call(self, fn: Callable[..., T], args: tuple[Any, ...], *, write: bool) -> T:
        conn = self._conn
        if conn is None:
            raise StoreError("the store is not open")
        if not write:
            return fn(conn, *args)
        with transaction(conn), _integrity():
            return fn(conn, *args)


# One function per call, run on the worker thread; writes run inside transaction().

_SESSION_COLUMNS = (
    "key, team, channel, thread_ts, sandbox_id, state, repo_url, created_at, last_activity"
)
_SELECT_SESSIONS = f"""
    SELECT {_SESSION_COLUMNS},
        (SELECT COALESCE(SUM(cost_usd), 0.0) FROM turns WHERE turns.key = sessions.key) AS cost_usd
    FROM sessions
"""


def _save_session(conn: sqlite3.Connection, r: SessionRecord) -> None:
    # An upsert, not INSERT OR REPLACE: replacing the row would cascade-delete its history.
    conn.execute(
        f"""
        INSERT INTO sessions ({_SESSION_COLUMNS})
        VALUES (:key, :team, :channel, :thread_ts, :sandbox_id, :state, :repo_url,
                :created_at, :last_activity)
        ON CONFLICT (key) DO UPDATE SET
            team = excluded.team, channel = excluded.channel, thread_ts = excluded.thread_ts,
            sandbox_id = excluded.sandbox_id, state = excluded.state,
            repo_url = excluded.repo_url, created_at = excluded.created_at,
            last_activity = excluded.last_activity
        """,
        asdict(r),
    )


def _get_session(conn: sqlite3.Connection, key: str) -> SessionRecord | None:
    row = conn.execute(f"{_SELECT_SESSIONS} WHERE key = ?", (key,)).fetchone()
    return SessionRecord(**row) if row else None


def _list_sessions(conn: sqlite3.Connection) -> list[SessionRecord]:
    rows = conn.execute(f"{_SELECT_SESSIONS} ORDER BY last_activity DESC, key")
    return [SessionRecord(**row) for row in rows]


def _update_session(conn: sqlite3.Connection, key: str, fields: dict[str, Any]) -> None:
    # Column names come from SESSION_UPDATABLE only (checked by the caller).
    sets = ", ".join(f"{name} = :{name}" for name in fields) or "key = key"
    cursor = conn.execute(f"UPDATE sessions SET {sets} WHERE key = :key", {**fields, "key": key})
    if cursor.rowcount == 0:
        raise NotFound(f"no session {key!r}")


def _save_history(conn: sqlite3.Connection, key: str, messages: list[dict[str, Any]]) -> None:
    # ensure_ascii keeps lone surrogates (from undecodable output) as escapes, which UTF-8 can't.
    conn.execute(
        "INSERT INTO history (key, messages) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET messages = excluded.messages",
        (key, json.dumps(messages)),
    )


def _load_history(conn: sqlite3.Connection, key: str) -> list[dict[str, Any]]:
    row = conn.execute("SELECT messages FROM history WHERE key = ?", (key,)).fetchone()
    return json.loads(row["messages"]) if row else []


def _add_file(conn: sqlite3.Connection, key: str, f: FileRecord) -> None:
    conn.execute(
        "INSERT INTO files (key, slack_file_id, name, size, sha256, sandbox_path, source)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (key, f.slack_file_id, _text(f.name), f.size, f.sha256, f.sandbox_path, _json(f.source)),
    )


def _files(conn: sqlite3.Connection, key: str) -> list[FileRecord]:
    rows = conn.execute(
        "SELECT slack_file_id, name, size, sha256, sandbox_path, source"
        " FROM files WHERE key = ? ORDER BY id",
        (key,),
    )
    return [FileRecord(**{**row, "source": json.loads(row["source"])}) for row in rows]


def _start_run(
    conn: sqlite3.Connection, key: str, run_id: str, question: str, at: float, user: str = ""
) -> None:
    conn.execute(
        "INSERT INTO runs (run_id, key, question, started_at, user) VALUES (?, ?, ?, ?, ?)",
        (run_id, key, _text(question), at, user),
    )


def _spent(conn: sqlite3.Connection, key: str | None, user: str | None, since: float) -> float:
    row = conn.execute(
        "SELECT COALESCE(SUM(turns.cost_usd), 0) FROM turns JOIN runs USING (run_id)"
        " WHERE (? IS NULL OR runs.key = ?) AND (? IS NULL OR runs.user = ?) AND turns.at >= ?",
        (key, key, user, user, since),
    ).fetchone()
    return float(row[0])


def _end_run(conn: sqlite3.Connection, run_id: str, outcome: str, at: float) -> None:
    # Only an unended run changes: when a stop and a failure race, the first outcome stands.
    conn.execute(
        "UPDATE runs SET outcome = ?, ended_at = ? WHERE run_id = ? AND outcome IS NULL",
        (outcome, at, run_id),
    )
    if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
        raise NotFound(f"no run {run_id!r}")


def _runs_in_flight(conn: sqlite3.Connection) -> list[RunRecord]:
    rows = conn.execute(
        "SELECT key, run_id, question, started_at, ended_at, outcome"
        " FROM runs WHERE outcome IS NULL ORDER BY started_at, run_id"
    )
    return [RunRecord(**row) for row in rows]


def _add_turn(
    conn: sqlite3.Connection,
    key: str,
    run_id: str,
    usage: dict[str, int],
    cost_usd: float | None,
    at: float,
) -> None:
    conn.execute(
        "INSERT INTO turns (key, run_id, usage, cost_usd, at) VALUES (?, ?, ?, ?, ?)",
        (key, run_id, _json(usage), cost_usd, at),
    )


def _add_tool_call(conn: sqlite3.Connection, key: str, c: ToolCallRecord) -> None:
    conn.execute(
        "INSERT INTO tool_calls (key, run_id, call_id, tool, language, code, status,"
        " exit_code, duration_s, excerpt, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key,
            c.run_id,
            c.call_id,
            c.tool,
            c.language,
            _text(c.code),
            c.status,
            c.exit_code,
            c.duration_s,
            _text(c.excerpt),
            c.at,
        ),
    )


def _tool_calls(conn: sqlite3.Connection, key: str) -> list[ToolCallRecord]:
    rows = conn.execute(
        "SELECT run_id, call_id, tool, language, code, status, exit_code, duration_s, excerpt, at"
        " FROM tool_calls WHERE key = ? ORDER BY id",
        (key,),
    )
    return [ToolCallRecord(**row) for row in rows]


# Helpers.


@contextlib.contextmanager
def _integrity() -> Iterator[None]:
    """Constraint failures as the store's own errors, the same for any backend."""
    try:
        yield
    except sqlite3.IntegrityError as e:
        if "FOREIGN KEY" in str(e):
            raise NotFound("the session or run it refers to is not in the store") from e
        raise StoreError(str(e)) from e


def _check(value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {allowed}")


def _text(s: str) -> str:
    """The text with lone surrogates replaced: SQLite stores UTF-8, which cannot hold them."""
    return s.encode("utf-8", "replace").decode("utf-8")


def _json(value: Any) -> str:
    return json.dumps(value)  # ASCII escapes: lone surrogates survive (see _text)
