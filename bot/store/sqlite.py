"""The SQLite store: one file, one connection, used from one worker thread (the schema and its
durability choices are in sqlite_schema.py)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import bot.store.sqlite_pool as sqlite_pool
import bot.store.sqlite_prune as upkeep
import bot.store.sqlite_rows as rows
import bot.store.sqlite_schedules as schedules
from bot.store.base import (
    RUN_OUTCOMES,
    SCHEDULE_STATES,
    SESSION_STATES,
    DefinitionRecord,
    FeedbackRecord,
    FileRecord,
    FiringRecord,
    NoteRecord,
    PoolRecord,
    Pruned,
    Queued,
    RunOutcome,
    RunRecord,
    ScheduleRecord,
    SessionRecord,
    StoreError,
    ToolCallRecord,
)
from bot.store.sqlite_schema import BUSY_TIMEOUT_MS, connect, migrate
from bot.store.sqlite_worker import StoreWorker
from bot.store.values import check, check_schedule_update, check_update

T = TypeVar("T")


class SqliteStore:
    """The Store on a local SQLite file."""

    def __init__(self, path: Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        """`busy_timeout_ms`: how long a write waits for another connection's lock."""
        self.path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._worker: StoreWorker | None = None

    async def open(self) -> None:
        if self._worker is not None:
            raise StoreError("the store is already open")
        worker = StoreWorker(self._connect, _disconnect, rows.integrity)
        await worker.start()
        self._worker = worker

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.stop()  # after every call already made

    async def ping(self) -> None:
        await self._read(rows.ping)

    async def fence(self, key: str) -> int:
        return await self._write(rows.fence, key)

    async def save_session(self, record: SessionRecord) -> None:
        check(record.state, SESSION_STATES)
        await self._write(rows.save_session, record)

    async def get_session(self, key: str) -> SessionRecord | None:
        return await self._read(rows.get_session, key)

    async def list_sessions(self) -> list[SessionRecord]:
        return await self._read(rows.list_sessions)

    async def update_session(self, key: str, *, token: int | None = None, **fields: Any) -> None:
        check_update(fields)
        await self._fenced(key, token, rows.update_session, key, fields)

    async def save_history(
        self,
        key: str,
        messages: list[dict[str, Any]],
        *,
        token: int | None = None,
        archive: dict[str, Any] | None = None,
    ) -> None:
        await self._fenced(key, token, rows.save_history, key, messages, archive)

    async def archived_history(self, key: str) -> list[dict[str, Any]]:
        return await self._read(rows.archived_history, key)

    async def load_history(self, key: str) -> list[dict[str, Any]]:
        return await self._read(rows.load_history, key)

    async def add_file(self, key: str, file: FileRecord, *, token: int | None = None) -> None:
        await self._fenced(key, token, rows.add_file, key, file)

    async def files(self, key: str) -> list[FileRecord]:
        return await self._read(rows.files, key)

    async def start_run(
        self,
        key: str,
        run_id: str,
        question: str,
        at: float,
        user: str = "",
        *,
        token: int | None = None,
    ) -> None:
        await self._fenced(key, token, rows.start_run, key, run_id, question, at, user)

    async def end_run(
        self, run_id: str, outcome: RunOutcome, at: float, *, token: int | None = None
    ) -> None:
        check(outcome, RUN_OUTCOMES)

        await self._fenced_run(run_id, token, rows.end_run, run_id, outcome, at)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._read(rows.get_run, run_id)

    async def request_stop(self, run_id: str, by: str) -> RunRecord | None:
        return await self._write(rows.request_stop, run_id, by)

    async def runs(self, key: str) -> list[RunRecord]:
        return await self._read(rows.runs, key)

    async def record_figures(
        self, run_id: str, figures: list[dict[str, Any]], *, token: int | None = None
    ) -> None:
        await self._fenced_run(run_id, token, rows.record_figures, run_id, figures)

    async def grant(self, key: str, usd: float, *, token: int | None = None) -> None:
        await self._fenced(key, token, rows.grant, key, usd)

    async def grant_once(
        self, key: str, grant_id: str, usd: float, *, token: int | None = None
    ) -> bool:
        return await self._fenced(key, token, rows.grant_once, key, grant_id, usd)

    async def enqueue(
        self, key: str, question: str, user: str, at: float, *, token: int | None = None
    ) -> int:
        return await self._fenced(key, token, rows.enqueue, key, question, user, at)

    async def take_queued(self, key: str, *, token: int | None = None) -> list[Queued]:
        return await self._fenced(key, token, rows.take_queued, key)

    async def runs_in_flight(self) -> list[RunRecord]:
        return await self._read(rows.runs_in_flight)

    async def add_turn(
        self,
        key: str,
        run_id: str,
        usage: dict[str, int],
        cost_usd: float | None,
        at: float,
        *,
        token: int | None = None,
        window_tokens: int | None = None,
    ) -> None:
        args = (key, run_id, usage, cost_usd, at, window_tokens)
        await self._fenced(key, token, rows.add_turn, *args)

    async def add_tool_call(
        self, key: str, call: ToolCallRecord, *, token: int | None = None
    ) -> None:
        await self._fenced(key, token, rows.add_tool_call, key, call)

    async def tool_calls(self, key: str) -> list[ToolCallRecord]:
        return await self._read(rows.tool_calls, key)

    async def add_feedback(self, run_id: str, user: str, value: str, at: float) -> None:
        await self._write(rows.add_feedback, run_id, user, value, at)

    async def feedback(self, key: str) -> list[FeedbackRecord]:
        return await self._read(rows.feedback, key)

    async def spent(
        self, *, key: str | None = None, user: str | None = None, since: float = 0.0
    ) -> float:
        return await self._read(rows.spent, key, user, since)

    # Upkeep.

    async def sessions_holding_sandboxes(
        self, quiet_since: float | None = None
    ) -> list[SessionRecord]:
        return await self._read(upkeep.sessions_holding_sandboxes, quiet_since)

    async def prune(
        self,
        sessions_before: float | None,
        runs_before: float | None,
        *,
        dry_run: bool = False,
    ) -> Pruned:
        if dry_run:
            return await self._read(upkeep.count_doomed, sessions_before, runs_before)
        total = Pruned()
        steps = ((upkeep.prune_sessions, sessions_before), (upkeep.prune_runs, runs_before))
        for step, cutoff in steps:
            # One transaction per batch: the bot's writes are queued in between.
            while cutoff is not None and (batch := await self._write(step, cutoff)) != Pruned():
                total += batch
        return total

    async def vacuum(self) -> None:
        await self._read(upkeep.vacuum)

    # The worker thread.

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path, self._busy_timeout_ms)
        try:
            migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    # Schedules.

    async def save_schedule(self, record: ScheduleRecord) -> None:
        check(record.state, SCHEDULE_STATES)
        await self._write(schedules.save_schedule, record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        return await self._read(schedules.get_schedule, schedule_id)

    async def list_schedules(self) -> list[ScheduleRecord]:
        return await self._read(schedules.list_schedules)

    async def update_schedule(self, schedule_id: str, **fields: Any) -> None:
        check_schedule_update(fields)
        await self._write(schedules.update_schedule, schedule_id, fields)

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._write(schedules.delete_schedule, schedule_id)

    async def claim_firing(self, schedule_id: str, fire_at: float, by: str, at: float) -> bool:
        return await self._write(schedules.claim_firing, schedule_id, fire_at, by, at)

    async def end_firing(
        self,
        schedule_id: str,
        fire_at: float,
        outcome: str,
        run_id: str = "",
        cost_usd: float = 0.0,
    ) -> int:
        return await self._write(
            schedules.end_firing, schedule_id, fire_at, outcome, run_id, cost_usd
        )

    async def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRecord]:
        return await self._read(schedules.firings, schedule_id, limit)

    # Channel memory.

    async def add_note(self, note: NoteRecord) -> None:
        await self._write(schedules.add_note, note)

    async def notes(self, place: str) -> list[NoteRecord]:
        return await self._read(schedules.notes, place)

    async def delete_note(self, place: str, note_id: str) -> bool:
        return await self._write(schedules.delete_note, place, note_id)

    async def save_definition(self, definition: DefinitionRecord) -> None:
        await self._write(schedules.save_definition, definition)

    async def definitions(self, place: str) -> list[DefinitionRecord]:
        return await self._read(schedules.definitions, place)

    async def delete_definition(self, place: str, name: str) -> bool:
        return await self._write(schedules.delete_definition, place, name)

    async def pool_add(self, sandbox_id: str, at: float) -> None:
        await self._write(sqlite_pool.pool_add, sandbox_id, at)

    async def pool_claim(self, at: float) -> str | None:
        return await self._write(sqlite_pool.pool_claim, at)

    async def pool(self) -> list[PoolRecord]:
        return await self._read(sqlite_pool.pool)

    async def pool_forget(self, sandbox_id: str) -> None:
        await self._write(sqlite_pool.pool_forget, sandbox_id)

    async def set_snapshot(self, key: str, snapshot_id: str | None) -> None:
        await self._write(sqlite_pool.set_snapshot, key, snapshot_id)

    async def snapshot_of(self, key: str) -> str | None:
        return await self._read(sqlite_pool.snapshot_of, key)

    async def snapshots(self) -> dict[str, str]:
        return await self._read(sqlite_pool.snapshots)

    # Plumbing.

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._submit(lambda conn: fn(conn, *args), write=False)

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._submit(lambda conn: fn(conn, *args), write=True)

    async def _fenced(self, key: str, token: int | None, fn: Callable[..., T], *args: Any) -> T:
        """A write for the thread `key`, refused (rolled back alone) if `token` is stale."""

        def write(conn: sqlite3.Connection) -> T:
            rows.check_fence(conn, key, token)
            return fn(conn, *args)

        return await self._write(write)

    async def _fenced_run(
        self, run_id: str, token: int | None, fn: Callable[..., T], *args: Any
    ) -> T:
        """A write for a run, refused (rolled back alone) if `token` is stale for the run's
        thread."""

        def write(conn: sqlite3.Connection) -> T:
            rows.check_fence(conn, rows.run_key(conn, run_id), token)
            return fn(conn, *args)

        return await self._write(write)

    async def _submit(self, job: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """On the worker's thread; writes back to back share a commit (sqlite_worker.py).
        A cancelled caller stops waiting, but a write already queued still lands."""
        if self._worker is None:
            raise StoreError("the store is not open")
        return await self._worker.run(job, write=write)


def _disconnect(conn: sqlite3.Connection) -> None:
    # Keeps the query planner's statistics fresh; best effort, as another process writing
    # now (the bot, beside a `sessions` command) can hold the lock it needs.
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("PRAGMA optimize")
    conn.close()
