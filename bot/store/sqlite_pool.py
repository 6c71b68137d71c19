"""The SQLite store's sandboxes kept apart from threads: the warm pool (a row per member; a
claim marks the oldest free one taken in the same statement that finds it, inside the
store's write transaction) and the snapshots suspended threads resume from."""

from __future__ import annotations

import sqlite3

from bot.store.base import PoolRecord


def pool_add(conn: sqlite3.Connection, sandbox_id: str, at: float) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO pool (sandbox_id, added_at) VALUES (?, ?)", (sandbox_id, at)
    )


def pool_claim(conn: sqlite3.Connection, at: float) -> str | None:
    row = conn.execute(
        "UPDATE pool SET claimed_at = ? WHERE sandbox_id = (SELECT sandbox_id FROM pool"
        " WHERE claimed_at IS NULL ORDER BY added_at, sandbox_id LIMIT 1) RETURNING sandbox_id",
        (at,),
    ).fetchone()
    return None if row is None else str(row[0])


def pool(conn: sqlite3.Connection) -> list[PoolRecord]:
    rows = conn.execute(
        "SELECT sandbox_id, added_at, claimed_at FROM pool ORDER BY added_at, sandbox_id"
    )
    return [PoolRecord(**dict(row)) for row in rows]


def pool_forget(conn: sqlite3.Connection, sandbox_id: str) -> None:
    conn.execute("DELETE FROM pool WHERE sandbox_id = ?", (sandbox_id,))


def set_snapshot(conn: sqlite3.Connection, key: str, snapshot_id: str | None) -> None:
    if snapshot_id is None:
        conn.execute("DELETE FROM snapshots WHERE key = ?", (key,))
    else:
        conn.execute(
            "INSERT OR REPLACE INTO snapshots (key, snapshot_id) VALUES (?, ?)", (key, snapshot_id)
        )


def snapshot_of(conn: sqlite3.Connection, key: str) -> str | None:
    row = conn.execute("SELECT snapshot_id FROM snapshots WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def snapshots(conn: sqlite3.Connection) -> dict[str, str]:
    return {str(k): str(i) for k, i in conn.execute("SELECT key, snapshot_id FROM snapshots")}
