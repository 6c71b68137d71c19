"""The store as the metrics see it: every call passed on to the store inside, its failures
counted, and the questions put into and taken from thread queues counted. Written out
method by method, so the type checker holds it to the Store protocol."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from bot.monitoring.metrics import Metrics
from bot.store.base import (
    DefinitionRecord,
    FeedbackRecord,
    FileRecord,
    FiringRecord,
    NoteRecord,
    NotFound,
    PoolRecord,
    Pruned,
    Queued,
    RunOutcome,
    RunRecord,
    ScheduleRecord,
    SessionRecord,
    Store,
    StoreError,
    ToolCallRecord,
)

T = TypeVar("T")


class MeteredStore:
    def __init__(self, store: Store, metrics: Metrics) -> None:
        self._store = store
        self._metrics = metrics

    async def _call(self, call: Awaitable[T]) -> T:
        try:
            return await call
        except NotFound:
            raise  # a write about what is not there: the caller's mistake, not the store's
        except StoreError:
            self._metrics.error("store")
            raise

    # -- UpkeepStore --
    async def open(self) -> None:
        await self._call(self._store.open())

    async def close(self) -> None:
        await self._call(self._store.close())

    async def ping(self) -> None:
        await self._call(self._store.ping())

    async def sessions_holding_sandboxes(
        self, quiet_since: float | None = None
    ) -> list[SessionRecord]:
        return await self._call(self._store.sessions_holding_sandboxes(quiet_since))

    async def prune(
        self, sessions_before: float | None, runs_before: float | None, *, dry_run: bool = False
    ) -> Pruned:
        return await self._call(self._store.prune(sessions_before, runs_before, dry_run=dry_run))

    async def vacuum(self) -> None:
        await self._call(self._store.vacuum())

    # -- SessionStore --
    async def save_session(self, record: SessionRecord) -> None:
        await self._call(self._store.save_session(record))

    async def get_session(self, key: str) -> SessionRecord | None:
        return await self._call(self._store.get_session(key))

    async def list_sessions(self) -> list[SessionRecord]:
        return await self._call(self._store.list_sessions())

    async def update_session(self, key: str, *, token: int | None = None, **fields: Any) -> None:
        await self._call(self._store.update_session(key, token=token, **fields))

    async def save_history(
        self,
        key: str,
        messages: list[dict[str, Any]],
        *,
        token: int | None = None,
        archive: dict[str, Any] | None = None,
    ) -> None:
        await self._call(self._store.save_history(key, messages, token=token, archive=archive))

    async def archived_history(self, key: str) -> list[dict[str, Any]]:
        return await self._call(self._store.archived_history(key))

    async def load_history(self, key: str) -> list[dict[str, Any]]:
        return await self._call(self._store.load_history(key))

    # -- FileStore --
    async def add_file(self, key: str, file: FileRecord, *, token: int | None = None) -> None:
        await self._call(self._store.add_file(key, file, token=token))

    async def files(self, key: str) -> list[FileRecord]:
        return await self._call(self._store.files(key))

    # -- RunStore --
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
        await self._call(self._store.start_run(key, run_id, question, at, user, token=token))

    async def end_run(
        self, run_id: str, outcome: RunOutcome, at: float, *, token: int | None = None
    ) -> None:
        await self._call(self._store.end_run(run_id, outcome, at, token=token))

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self._call(self._store.get_run(run_id))

    async def runs(self, key: str) -> list[RunRecord]:
        return await self._call(self._store.runs(key))

    async def record_figures(
        self, run_id: str, figures: list[dict[str, Any]], *, token: int | None = None
    ) -> None:
        await self._call(self._store.record_figures(run_id, figures, token=token))

    async def request_stop(self, run_id: str, by: str) -> RunRecord | None:
        return await self._call(self._store.request_stop(run_id, by))

    async def runs_in_flight(self) -> list[RunRecord]:
        return await self._call(self._store.runs_in_flight())

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
        await self._call(
            self._store.add_turn(
                key, run_id, usage, cost_usd, at, token=token, window_tokens=window_tokens
            )
        )

    async def add_tool_call(
        self, key: str, call: ToolCallRecord, *, token: int | None = None
    ) -> None:
        await self._call(self._store.add_tool_call(key, call, token=token))

    async def tool_calls(self, key: str) -> list[ToolCallRecord]:
        return await self._call(self._store.tool_calls(key))

    async def add_feedback(self, run_id: str, user: str, value: str, at: float) -> None:
        await self._call(self._store.add_feedback(run_id, user, value, at))

    async def feedback(self, key: str) -> list[FeedbackRecord]:
        return await self._call(self._store.feedback(key))

    async def spent(
        self, *, key: str | None = None, user: str | None = None, since: float = 0.0
    ) -> float:
        return await self._call(self._store.spent(key=key, user=user, since=since))

    # -- CoordinationStore --
    async def fence(self, key: str) -> int:
        return await self._call(self._store.fence(key))

    async def enqueue(
        self, key: str, question: str, user: str, at: float, *, token: int | None = None
    ) -> int:
        queued_id = await self._call(self._store.enqueue(key, question, user, at, token=token))
        self._metrics.queued.inc()
        return queued_id

    async def take_queued(self, key: str, *, token: int | None = None) -> list[Queued]:
        taken = await self._call(self._store.take_queued(key, token=token))
        self._metrics.taken.inc(len(taken))
        return taken

    async def grant(self, key: str, usd: float, *, token: int | None = None) -> None:
        await self._call(self._store.grant(key, usd, token=token))

    async def grant_once(
        self, key: str, grant_id: str, usd: float, *, token: int | None = None
    ) -> bool:
        return await self._call(self._store.grant_once(key, grant_id, usd, token=token))

    # -- ScheduleStore --
    async def save_schedule(self, record: ScheduleRecord) -> None:
        await self._call(self._store.save_schedule(record))

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        return await self._call(self._store.get_schedule(schedule_id))

    async def list_schedules(self) -> list[ScheduleRecord]:
        return await self._call(self._store.list_schedules())

    async def update_schedule(self, schedule_id: str, **fields: Any) -> None:
        await self._call(self._store.update_schedule(schedule_id, **fields))

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._call(self._store.delete_schedule(schedule_id))

    async def claim_firing(self, schedule_id: str, fire_at: float, by: str, at: float) -> bool:
        return await self._call(self._store.claim_firing(schedule_id, fire_at, by, at))

    async def end_firing(
        self,
        schedule_id: str,
        fire_at: float,
        outcome: str,
        run_id: str = "",
        cost_usd: float = 0.0,
    ) -> int:
        ended = self._store.end_firing(schedule_id, fire_at, outcome, run_id, cost_usd)
        return await self._call(ended)

    async def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRecord]:
        return await self._call(self._store.firings(schedule_id, limit))

    # -- PoolStore --
    async def pool_add(self, sandbox_id: str, at: float) -> None:
        await self._call(self._store.pool_add(sandbox_id, at))

    async def pool_claim(self, at: float) -> str | None:
        return await self._call(self._store.pool_claim(at))

    async def pool(self) -> list[PoolRecord]:
        return await self._call(self._store.pool())

    async def pool_forget(self, sandbox_id: str) -> None:
        await self._call(self._store.pool_forget(sandbox_id))

    # -- SnapshotStore --
    async def set_snapshot(self, key: str, snapshot_id: str | None) -> None:
        await self._call(self._store.set_snapshot(key, snapshot_id))

    async def snapshot_of(self, key: str) -> str | None:
        return await self._call(self._store.snapshot_of(key))

    async def snapshots(self) -> dict[str, str]:
        return await self._call(self._store.snapshots())

    # -- NoteStore --
    async def add_note(self, note: NoteRecord) -> None:
        await self._call(self._store.add_note(note))

    async def notes(self, place: str) -> list[NoteRecord]:
        return await self._call(self._store.notes(place))

    async def delete_note(self, place: str, note_id: str) -> bool:
        return await self._call(self._store.delete_note(place, note_id))

    async def save_definition(self, definition: DefinitionRecord) -> None:
        await self._call(self._store.save_definition(definition))

    async def definitions(self, place: str) -> list[DefinitionRecord]:
        return await self._call(self._store.definitions(place))

    async def delete_definition(self, place: str, name: str) -> bool:
        return await self._call(self._store.delete_definition(place, name))
