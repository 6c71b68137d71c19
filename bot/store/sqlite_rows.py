"""The SQLite store's queries: one function per call, run on the store's worker thread;
writes run inside a transaction."""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from bot.store.base import (
    FeedbackRecord,
    Fenced,
    FileRecord,
    NotFound,
    Queued,
    RunRecord,
    SessionRecord,
    StoreError,
    ToolCallRecord,
)
from bot.store.values import prompt_tokens
from bot.store.values import text as _text

_SESSION_COLUMNS = "key, sandbox_id, state, repo_url, created_at, last_activity"
_SELECT_SESSIONS = f"""
    SELECT {_SESSION_COLUMNS},
        (SELECT COALESCE(SUM(cost_usd), 0.0) FROM turns WHERE turns.key = sessions.key) AS cost_usd,
        granted_usd, prompt_tokens, window_tokens, canvas, chart_files
    FROM sessions
"""


def save_session(conn: sqlite3.Connection, r: SessionRecord) -> None:
    # An upsert, not INSERT OR REPLACE: replacing the row would cascade-delete its history.
    conn.execute(
        f"""
        INSERT INTO sessions ({_SESSION_COLUMNS})
        VALUES (:key, :sandbox_id, :state, :repo_url, :created_at, :last_activity)
        ON CONFLICT (key) DO UPDATE SET
            sandbox_id = excluded.sandbox_id, state = excluded.state,
            repo_url = excluded.repo_url, created_at = excluded.created_at,
            last_activity = excluded.last_activity
        """,
        asdict(r),
    )


def ping(conn: sqlite3.Connection) -> None:
    """Reads a page of the file, so a file gone bad fails here."""
    try:
        conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchall()
    except sqlite3.Error as e:
        raise StoreError(f"SQLite: {e}") from e


def get_session(conn: sqlite3.Connection, key: str) -> SessionRecord | None:
    row = conn.execute(f"{_SELECT_SESSIONS} WHERE key = ?", (key,)).fetchone()
    return SessionRecord(**row) if row else None


def list_sessions(conn: sqlite3.Connection) -> list[SessionRecord]:
    rows = conn.execute(f"{_SELECT_SESSIONS} ORDER BY last_activity DESC, key")
    return [SessionRecord(**row) for row in rows]


def update_session(conn: sqlite3.Connection, key: str, fields: dict[str, Any]) -> None:
    # Column names come from SESSION_UPDATABLE only (checked by the caller).
    sets = ", ".join(f"{name} = :{name}" for name in fields) or "key = key"
    cursor = conn.execute(f"UPDATE sessions SET {sets} WHERE key = :key", {**fields, "key": key})
    if cursor.rowcount == 0:
        raise NotFound(f"no session {key!r}")


def save_history(
    conn: sqlite3.Connection,
    key: str,
    messages: list[dict[str, Any]],
    archive: dict[str, Any] | None = None,
) -> None:
    # ensure_ascii keeps lone surrogates (from undecodable output) as escapes, which UTF-8 can't.
    conn.execute(
        "INSERT INTO history (key, messages) VALUES (?, ?)"
        " ON CONFLICT (key) DO UPDATE SET messages = excluded.messages",
        (key, json.dumps(messages)),
    )
    if archive:
        conn.execute(
            "INSERT INTO history_archive (key, entry) VALUES (?, ?)", (key, json.dumps(archive))
        )


def archived_history(conn: sqlite3.Connection, key: str) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT entry FROM history_archive WHERE key = ? ORDER BY id", (key,))
    return [json.loads(row["entry"]) for row in rows]


def load_history(conn: sqlite3.Connection, key: str) -> list[dict[str, Any]]:
    row = conn.execute("SELECT messages FROM history WHERE key = ?", (key,)).fetchone()
    return json.loads(row["messages"]) if row else []


def add_file(conn: sqlite3.Connection, key: str, f: FileRecord) -> None:
    conn.execute(
        "INSERT INTO files (key, slack_file_id, name, size, sha256, sandbox_path, source, cards)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key,
            f.slack_file_id,
            _text(f.name),
            f.size,
            f.sha256,
            f.sandbox_path,
            _json(f.source),
            _json(f.cards),
        ),
    )


def files(conn: sqlite3.Connection, key: str) -> list[FileRecord]:
    rows = conn.execute(
        "SELECT slack_file_id, name, size, sha256, sandbox_path, source, cards"
        " FROM files WHERE key = ? ORDER BY id",
        (key,),
    )
    return [
        FileRecord(
            **{**row, "source": json.loads(row["source"]), "cards": json.loads(row["cards"])}
        )
        for row in rows
    ]


def start_run(
    conn: sqlite3.Connection, key: str, run_id: str, question: str, at: float, user: str = ""
) -> None:
    conn.execute(
        "INSERT INTO runs (run_id, key, question, started_at, user) VALUES (?, ?, ?, ?, ?)",
        (run_id, key, _text(question), at, user),
    )


def spent(conn: sqlite3.Connection, key: str | None, user: str | None, since: float) -> float:
    row = conn.execute(
        "SELECT COALESCE(SUM(turns.cost_usd), 0) FROM turns JOIN runs USING (run_id)"
        " WHERE (? IS NULL OR runs.key = ?) AND (? IS NULL OR runs.user = ?) AND turns.at >= ?",
        (key, key, user, user, since),
    ).fetchone()
    return float(row[0])


def end_run(conn: sqlite3.Connection, run_id: str, outcome: str, at: float) -> None:
    # Only an unended run changes: when a stop and a failure race, the first outcome stands.
    conn.execute(
        "UPDATE runs SET outcome = ?, ended_at = ? WHERE run_id = ? AND outcome IS NULL",
        (outcome, at, run_id),
    )
    if not conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
        raise NotFound(f"no run {run_id!r}")


_RUN_COLUMNS = "key, run_id, question, started_at, ended_at, outcome, user, stopped_by, figures"


def _run(row: sqlite3.Row) -> RunRecord:
    return RunRecord(**{**dict(row), "figures": tuple(json.loads(row["figures"]))})


def runs_in_flight(conn: sqlite3.Connection) -> list[RunRecord]:
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE outcome IS NULL ORDER BY started_at, run_id"
    )
    return [_run(row) for row in rows]


def get_run(conn: sqlite3.Connection, run_id: str) -> RunRecord | None:
    row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return _run(row) if row else None


def runs(conn: sqlite3.Connection, key: str) -> list[RunRecord]:
    rows = conn.execute(
        f"SELECT {_RUN_COLUMNS} FROM runs WHERE key = ? AND run_id IN"
        " (SELECT run_id FROM turns WHERE key = ?) ORDER BY started_at, run_id",
        (key, key),
    )
    return [_run(row) for row in rows]


def record_figures(conn: sqlite3.Connection, run_id: str, figures: list[dict[str, Any]]) -> None:
    data = json.dumps(figures, ensure_ascii=True)
    cursor = conn.execute("UPDATE runs SET figures = ? WHERE run_id = ?", (data, run_id))
    if cursor.rowcount == 0:
        raise NotFound(f"no run {run_id!r}")


def request_stop(conn: sqlite3.Connection, run_id: str, by: str) -> RunRecord | None:
    conn.execute(
        "UPDATE runs SET stopped_by = ? WHERE run_id = ? AND outcome IS NULL"
        " AND stopped_by IS NULL",
        (by, run_id),
    )
    run = get_run(conn, run_id)
    return run if run and run.outcome is None else None


def grant(conn: sqlite3.Connection, key: str, usd: float) -> None:
    cursor = conn.execute(
        "UPDATE sessions SET granted_usd = granted_usd + ? WHERE key = ?", (usd, key)
    )
    if cursor.rowcount == 0:
        raise NotFound(f"no session {key!r}")


def grant_once(conn: sqlite3.Connection, key: str, grant_id: str, usd: float) -> bool:
    if conn.execute("SELECT 1 FROM sessions WHERE key = ?", (key,)).fetchone() is None:
        raise NotFound(f"no session {key!r}")
    cursor = conn.execute(
        "INSERT OR IGNORE INTO continues (grant_id, key) VALUES (?, ?)", (grant_id, key)
    )
    if cursor.rowcount == 0:
        return False  # used before
    grant(conn, key, usd)
    return True


def enqueue(conn: sqlite3.Connection, key: str, question: str, user: str, at: float) -> int:
    cursor = conn.execute(
        "INSERT INTO queue (key, question, user, at) VALUES (?, ?, ?, ?)",
        (key, _text(question), user, at),
    )
    return int(cursor.lastrowid or 0)


def take_queued(conn: sqlite3.Connection, key: str) -> list[Queued]:
    """The oldest question waiting and those right after it from the same asker."""
    rows = conn.execute(
        "SELECT id, question, user, at FROM queue WHERE key = ? ORDER BY id", (key,)
    ).fetchall()
    asker = rows[0]["user"] if rows else None
    taken = [Queued(**row) for row in itertools.takewhile(lambda r: r["user"] == asker, rows)]
    if taken:
        conn.execute("DELETE FROM queue WHERE key = ? AND id <= ?", (key, taken[-1].id))
    return taken


def add_turn(
    conn: sqlite3.Connection,
    key: str,
    run_id: str,
    usage: dict[str, int],
    cost_usd: float | None,
    at: float,
    window_tokens: int | None = None,
) -> None:
    conn.execute(
        "INSERT INTO turns (key, run_id, usage, cost_usd, at) VALUES (?, ?, ?, ?, ?)",
        (key, run_id, _json(usage), cost_usd, at),
    )
    conn.execute(
        "UPDATE sessions SET prompt_tokens = ?, window_tokens = ? WHERE key = ?",
        (prompt_tokens(usage), window_tokens or 0, key),
    )


def add_tool_call(conn: sqlite3.Connection, key: str, c: ToolCallRecord) -> None:
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


def tool_calls(conn: sqlite3.Connection, key: str) -> list[ToolCallRecord]:
    rows = conn.execute(
        "SELECT run_id, call_id, tool, language, code, status, exit_code, duration_s, excerpt, at"
        " FROM tool_calls WHERE key = ? ORDER BY id",
        (key,),
    )
    return [ToolCallRecord(**row) for row in rows]


def fence(conn: sqlite3.Connection, key: str) -> int:
    row = conn.execute(
        "INSERT INTO fences (key, token) VALUES (?, 1)"
        " ON CONFLICT (key) DO UPDATE SET token = token + 1 RETURNING token",
        (key,),
    ).fetchone()
    return int(row[0])


def check_fence(conn: sqlite3.Connection, key: str, token: int | None) -> None:
    """Refuse a write carrying a token older than the thread's newest (in its transaction)."""
    if token is None:
        return
    row = conn.execute("SELECT token FROM fences WHERE key = ?", (key,)).fetchone()
    if row is None or row[0] != token:
        raise Fenced(f"thread {key!r}: token {token} is stale")


def run_key(conn: sqlite3.Connection, run_id: str) -> str:
    row = conn.execute("SELECT key FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        raise NotFound(f"no run {run_id!r}")
    return str(row[0])


# Helpers.


@contextlib.contextmanager
def integrity() -> Iterator[None]:
    """Constraint failures as the store's own errors, the same for any backend."""
    try:
        yield
    except sqlite3.IntegrityError as e:
        if "FOREIGN KEY" in str(e):
            raise NotFound("the session or run it refers to is not in the store") from e
        raise StoreError(str(e)) from e


def _json(value: Any) -> str:
    return json.dumps(value)  # ASCII escapes: lone surrogates survive (see _text)


def add_feedback(conn: sqlite3.Connection, run_id: str, user: str, value: str, at: float) -> None:
    conn.execute(
        "INSERT INTO feedback (run_id, user, value, at) VALUES (?, ?, ?, ?)",
        (run_id, user, value, at),
    )


def feedback(conn: sqlite3.Connection, key: str) -> list[FeedbackRecord]:
    rows = conn.execute(
        "SELECT feedback.run_id, feedback.user, value, at FROM feedback"
        " JOIN runs ON runs.run_id = feedback.run_id WHERE runs.key = ? ORDER BY feedback.id",
        (key,),
    )
    return [FeedbackRecord(*row) for row in rows]
