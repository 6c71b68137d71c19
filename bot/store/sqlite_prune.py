"""The SQLite store's upkeep queries: the sessions the reaper may act on, and retention
(deleting what is done, in batches of short transactions, so the bot's own writes go on in
between). Run on the store's worker thread, like the rest of its queries."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from bot.store.base import Pruned, SessionRecord
from bot.store.sqlite_rows import _SELECT_SESSIONS

BATCH = 500  # rows a prune deletes per transaction

# From the partial index sessions_with_sandbox: only the sessions that hold a sandbox.
_HOLDING = f"{_SELECT_SESSIONS} WHERE sandbox_id IS NOT NULL"

# Done: quiet since before :before, no sandbox named, no run of it in flight.
_DONE_SESSIONS = """
    SELECT key FROM sessions
    WHERE last_activity < :before AND sandbox_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.key = sessions.key AND outcome IS NULL)
"""
_ENDED_RUNS = "SELECT run_id FROM runs WHERE ended_at < :runs_before"
_IN = "(SELECT value FROM json_each(:ids))"


def sessions_holding_sandboxes(
    conn: sqlite3.Connection, quiet_since: float | None
) -> list[SessionRecord]:
    if quiet_since is None:
        rows = conn.execute(f"{_HOLDING} ORDER BY last_activity DESC, key")
    else:
        query = f"{_HOLDING} AND last_activity <= ? ORDER BY last_activity DESC, key"
        rows = conn.execute(query, (quiet_since,))
    return [SessionRecord(**row) for row in rows]


def prune_sessions(conn: sqlite3.Connection, before: float, limit: int = BATCH) -> Pruned:
    """One batch of done sessions deleted, with all they hold (the foreign keys cascade)."""
    query = f"{_DONE_SESSIONS} LIMIT :limit"
    keys = [r[0] for r in conn.execute(query, {"before": before, "limit": limit})]
    if not keys:
        return Pruned()
    ids = json.dumps(keys)
    counted = _counts(conn, f"(SELECT run_id FROM runs WHERE key IN {_IN})", {"ids": ids})
    conn.execute(f"DELETE FROM sessions WHERE key IN {_IN}", (ids,))
    conn.execute(f"DELETE FROM fences WHERE key IN {_IN}", (ids,))
    return Pruned(len(keys)) + counted


def prune_runs(conn: sqlite3.Connection, runs_before: float, limit: int = BATCH) -> Pruned:
    """One batch of runs ended before `runs_before` deleted, with their turns, tool calls and
    feedback (the foreign keys cascade)."""
    query = f"{_ENDED_RUNS} LIMIT :limit"
    run_ids = [r[0] for r in conn.execute(query, {"runs_before": runs_before, "limit": limit})]
    if not run_ids:
        return Pruned()
    ids = json.dumps(run_ids)
    counted = _counts(conn, _IN, {"ids": ids})
    conn.execute(f"DELETE FROM runs WHERE run_id IN {_IN}", (ids,))
    return counted


def count_doomed(
    conn: sqlite3.Connection, before: float | None, runs_before: float | None
) -> Pruned:
    """What a prune would delete now (a dry run: nothing is)."""
    params = {"before": before, "runs_before": runs_before}
    sessions = conn.execute(f"SELECT COUNT(*) FROM ({_DONE_SESSIONS})", params).fetchone()[0]
    runs = f"SELECT run_id FROM runs WHERE key IN ({_DONE_SESSIONS}) UNION {_ENDED_RUNS}"
    return Pruned(sessions) + _counts(conn, f"({runs})", params)


def _counts(conn: sqlite3.Connection, runs: str, params: Mapping[str, object]) -> Pruned:
    """The runs named by the subquery `runs`, and their tool calls and feedback."""
    row = conn.execute(
        f"""SELECT (SELECT COUNT(*) FROM runs WHERE run_id IN {runs}),
                   (SELECT COUNT(*) FROM tool_calls WHERE run_id IN {runs}),
                   (SELECT COUNT(*) FROM feedback WHERE run_id IN {runs})""",
        params,
    ).fetchone()
    return Pruned(0, *row)


def vacuum(conn: sqlite3.Connection) -> None:
    """Rewrite the file without its free pages, and fold the WAL back in (outside a
    transaction: VACUUM cannot run in one)."""
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
