"""The SQLite store's schema and connection: migrations in order, WAL, one transaction per write.

Durability choices:
- WAL journal: a commit is one append to the `-wal` file, and after a crash the frames of a
  transaction that never wrote its commit frame are ignored, so a killed write leaves no trace.
- synchronous=FULL: the WAL is synced on every commit, so a commit the bot acted on (a sandbox
  made, a reply posted) survives a power loss or host crash too, not just a killed process.
  NORMAL syncs only at checkpoints and may lose the last commits then. Writes queued back
  to back (many threads at once) share one commit, so the syncs do not pile up.
- One connection on one thread: calls are serialised in the order they were made, and the
  event loop never waits on the disk (sqlite_worker.py).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

from bot.store.base import StoreError

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
    # 4: what a run's front end used to keep in memory: who stopped it, Continue allowances,
    # and the questions waiting for a thread's run to end.
    """
    ALTER TABLE runs ADD COLUMN stopped_by TEXT;
    ALTER TABLE sessions ADD COLUMN granted_usd REAL NOT NULL DEFAULT 0;

    CREATE TABLE queue (
        id       INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: waiters are keyed by it
        key      TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        question TEXT NOT NULL,
        user     TEXT NOT NULL,
        at       REAL NOT NULL
    );
    CREATE INDEX queue_by_key ON queue (key, id);
    """,
    # 5: each file's data cards (JSON), so a resumed session does not profile it again.
    """
    ALTER TABLE files ADD COLUMN cards TEXT NOT NULL DEFAULT '[]';
    """,
    # 6: what people thought of an answer (Slack's feedback buttons), against its run.
    """
    CREATE TABLE feedback (
        id     INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        user   TEXT NOT NULL,
        value  TEXT NOT NULL,      -- good | bad
        at     REAL NOT NULL
    );
    CREATE INDEX feedback_by_run ON feedback (run_id);
    """,
    # 7: the Continue buttons used, so each grants its allowance once.
    """
    CREATE TABLE continues (
        grant_id TEXT PRIMARY KEY,
        key      TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE
    );
    """,
    # 8: each thread's newest fencing token (Store.fence); a thread without a row has none.
    """
    CREATE TABLE fences (
        key   TEXT PRIMARY KEY,
        token INTEGER NOT NULL
    );
    """,
    # 9: the latest turn's prompt size and the model's context window then (0: not known).
    """
    ALTER TABLE sessions ADD COLUMN prompt_tokens INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN window_tokens INTEGER NOT NULL DEFAULT 0;
    """,
    # 10: the parts of a conversation that clearing or compaction replaced, kept for export.
    """
    CREATE TABLE history_archive (
        id    INTEGER PRIMARY KEY,  -- the order archived
        key   TEXT NOT NULL REFERENCES sessions (key) ON DELETE CASCADE,
        entry TEXT NOT NULL         -- JSON: when, why, and the messages as they were
    );
    CREATE INDEX history_archive_key ON history_archive (key, id);
    """,
    # 11: the thread's report canvas in Slack (JSON: its id and a digest of what it holds).
    """
    ALTER TABLE sessions ADD COLUMN canvas TEXT NOT NULL DEFAULT '';
    """,
    # 12: what each answer's figures were traced to (JSON: a list of objects).
    """
    ALTER TABLE runs ADD COLUMN figures TEXT NOT NULL DEFAULT '[]';
    """,
    # 13: the chart images the bot shared in the thread (JSON: Slack file id -> name).
    """
    ALTER TABLE sessions ADD COLUMN chart_files TEXT NOT NULL DEFAULT '';
    """,
    # 14: what the reaper and retention read: the sessions holding a sandbox (a few, however
    # many are stored), the runs by when they ended, and the Continue grants by session (so
    # deleting a session finds its own).
    """
    CREATE INDEX sessions_with_sandbox ON sessions (last_activity) WHERE sandbox_id IS NOT NULL;
    CREATE INDEX runs_by_end ON runs (ended_at) WHERE ended_at IS NOT NULL;
    CREATE INDEX continues_by_key ON continues (key);
    """,
    # 15: a session is named by its front end's key alone: the Slack thread's parts, which
    # only the Slack side reads, live in the key it wrote.
    """
    ALTER TABLE sessions DROP COLUMN team;
    ALTER TABLE sessions DROP COLUMN channel;
    ALTER TABLE sessions DROP COLUMN thread_ts;
    """,
    # 16: schedules, and each firing claimed once by its (schedule, due time).
    """
    CREATE TABLE schedules (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        owner TEXT NOT NULL,
        cron TEXT NOT NULL,
        zone TEXT NOT NULL,
        question TEXT NOT NULL,
        created_at REAL NOT NULL,
        state TEXT NOT NULL,
        paused_why TEXT NOT NULL DEFAULT '',
        last_fire_at REAL,
        failures INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE firings (
        schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
        fire_at REAL NOT NULL,
        claimed_by TEXT NOT NULL,
        claimed_at REAL NOT NULL,
        outcome TEXT NOT NULL DEFAULT '',
        run_id TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (schedule_id, fire_at)
    );
    """,
    # 17: a firing asked for outside the cadence (Retry, run-now).
    """
    ALTER TABLE schedules ADD COLUMN run_now_at REAL;
    """,
    # 18: where a schedule posts its firings (its thread, or new messages in the channel).
    """
    ALTER TABLE schedules ADD COLUMN post_as TEXT NOT NULL DEFAULT 'thread';
    """,
    # 19: what each firing's run cost (the month's schedule spend).
    """
    ALTER TABLE firings ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
    """,
    # 20: channel memory.
    """
    CREATE TABLE notes (
        id TEXT PRIMARY KEY,
        place TEXT NOT NULL,
        text TEXT NOT NULL,
        saved_by TEXT NOT NULL,
        saved_at REAL NOT NULL
    );
    CREATE INDEX notes_by_place ON notes (place, saved_at);
    """,
    # 21: saved definitions.
    """
    CREATE TABLE definitions (
        place TEXT NOT NULL,
        name TEXT NOT NULL,
        tool TEXT NOT NULL,
        language TEXT NOT NULL,
        code TEXT NOT NULL,
        figures TEXT NOT NULL,
        run_id TEXT NOT NULL,
        saved_by TEXT NOT NULL,
        saved_at REAL NOT NULL,
        PRIMARY KEY (place, name)
    );
    """,
    # 22: the warm pool.
    """
    CREATE TABLE pool (
        sandbox_id TEXT PRIMARY KEY,
        added_at REAL NOT NULL,
        claimed_at REAL
    );
    """,
    # 23: the snapshot each suspended thread resumes from.
    """
    CREATE TABLE snapshots (
        key TEXT PRIMARY KEY,
        snapshot_id TEXT NOT NULL
    );
    """,
)


def connect(path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """A connection set up as the store uses it."""
    # isolation_level=None: no implicit transactions; every write goes through transaction().
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
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
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


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
