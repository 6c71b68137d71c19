"""The SQLite store's schedule and channel note queries, run on its worker thread like
`sqlite_rows`. A firing is claimed by inserting its (schedule, due time) row: the primary
key lets exactly one insert through."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict
from typing import Any

from bot.store.base import DefinitionRecord, FiringRecord, NoteRecord, NotFound, ScheduleRecord
from bot.store.values import text

_COLUMNS = (
    "id, key, owner, cron, zone, question, created_at, state, paused_why, last_fire_at, "
    "failures, run_now_at, post_as"
)


def save_schedule(conn: sqlite3.Connection, r: ScheduleRecord) -> None:
    values = {**asdict(r), "question": text(r.question)}
    conn.execute(
        f"INSERT INTO schedules ({_COLUMNS}) VALUES (:id, :key, :owner, :cron, :zone,"
        " :question, :created_at, :state, :paused_why, :last_fire_at, :failures, :run_now_at,"
        " :post_as)"
        " ON CONFLICT (id) DO UPDATE SET key = excluded.key, owner = excluded.owner,"
        " cron = excluded.cron, zone = excluded.zone, question = excluded.question,"
        " state = excluded.state, paused_why = excluded.paused_why,"
        " last_fire_at = excluded.last_fire_at, failures = excluded.failures,"
        " run_now_at = excluded.run_now_at, post_as = excluded.post_as",
        values,
    )


def get_schedule(conn: sqlite3.Connection, schedule_id: str) -> ScheduleRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))
    found = row.fetchone()
    return ScheduleRecord(**dict(found)) if found else None


def list_schedules(conn: sqlite3.Connection) -> list[ScheduleRecord]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM schedules ORDER BY created_at, id")
    return [ScheduleRecord(**dict(row)) for row in rows]


def update_schedule(conn: sqlite3.Connection, schedule_id: str, fields: dict[str, Any]) -> None:
    # Column names come from SCHEDULE_UPDATABLE only (checked by the caller).
    sets = ", ".join(f"{name} = :{name}" for name in fields) or "id = id"
    values = {**fields, "id": schedule_id}
    if "question" in values:
        values["question"] = text(values["question"])
    if conn.execute(f"UPDATE schedules SET {sets} WHERE id = :id", values).rowcount == 0:
        raise NotFound(f"no schedule {schedule_id!r}")


def delete_schedule(conn: sqlite3.Connection, schedule_id: str) -> None:
    conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,))


def claim_firing(
    conn: sqlite3.Connection, schedule_id: str, fire_at: float, by: str, at: float
) -> bool:
    if conn.execute("SELECT 1 FROM schedules WHERE id = ?", (schedule_id,)).fetchone() is None:
        return False
    claimed = conn.execute(
        "INSERT INTO firings (schedule_id, fire_at, claimed_by, claimed_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (schedule_id, fire_at, by, at),
    ).rowcount
    if claimed:
        conn.execute(
            "UPDATE schedules SET last_fire_at = ? WHERE id = ?"
            " AND (last_fire_at IS NULL OR last_fire_at < ?)",
            (fire_at, schedule_id, fire_at),
        )
    return bool(claimed)


def end_firing(
    conn: sqlite3.Connection,
    schedule_id: str,
    fire_at: float,
    outcome: str,
    run_id: str,
    cost_usd: float,
) -> int:
    ended = conn.execute(
        "UPDATE firings SET outcome = ?, run_id = ?, cost_usd = ? WHERE schedule_id = ?"
        " AND fire_at = ? AND outcome = ''",
        (outcome, run_id, cost_usd, schedule_id, fire_at),
    ).rowcount
    if ended:
        failures = "failures + 1" if outcome == "failed" else "0"
        conn.execute(f"UPDATE schedules SET failures = {failures} WHERE id = ?", (schedule_id,))
    row = conn.execute("SELECT failures FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    if row is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    return int(row[0])


def firings(conn: sqlite3.Connection, schedule_id: str, limit: int) -> list[FiringRecord]:
    rows = conn.execute(
        "SELECT schedule_id, fire_at, claimed_by, claimed_at, outcome, run_id, cost_usd"
        " FROM firings"
        " WHERE schedule_id = ? ORDER BY fire_at DESC LIMIT ?",
        (schedule_id, limit),
    )
    return [FiringRecord(**dict(row)) for row in rows]


def add_note(conn: sqlite3.Connection, note: NoteRecord) -> None:
    values = {**asdict(note), "text": text(note.text)}
    conn.execute(
        "INSERT INTO notes (id, place, text, saved_by, saved_at)"
        " VALUES (:id, :place, :text, :saved_by, :saved_at)",
        values,
    )


def notes(conn: sqlite3.Connection, place: str) -> list[NoteRecord]:
    rows = conn.execute(
        "SELECT id, place, text, saved_by, saved_at FROM notes WHERE place = ?"
        " ORDER BY saved_at, id",
        (place,),
    )
    return [NoteRecord(**dict(row)) for row in rows]


def delete_note(conn: sqlite3.Connection, place: str, note_id: str) -> bool:
    deleted = conn.execute("DELETE FROM notes WHERE place = ? AND id = ?", (place, note_id))
    return deleted.rowcount > 0


def save_definition(conn: sqlite3.Connection, d: DefinitionRecord) -> None:
    values = {**asdict(d), "code": text(d.code), "figures": json.dumps(list(d.figures))}
    conn.execute(
        "INSERT OR REPLACE INTO definitions (place, name, tool, language, code, figures,"
        " run_id, saved_by, saved_at) VALUES (:place, :name, :tool, :language, :code,"
        " :figures, :run_id, :saved_by, :saved_at)",
        values,
    )


def definitions(conn: sqlite3.Connection, place: str) -> list[DefinitionRecord]:
    rows = conn.execute(
        "SELECT place, name, tool, language, code, figures, run_id, saved_by, saved_at"
        " FROM definitions WHERE place = ? ORDER BY name",
        (place,),
    )
    return [
        DefinitionRecord(**{**dict(row), "figures": tuple(json.loads(row["figures"]))})
        for row in rows
    ]


def delete_definition(conn: sqlite3.Connection, place: str, name: str) -> bool:
    deleted = conn.execute("DELETE FROM definitions WHERE place = ? AND name = ?", (place, name))
    return deleted.rowcount > 0
