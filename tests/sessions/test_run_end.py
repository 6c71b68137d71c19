"""A run's end survives a store blip (a locked SQLite, a Redis restart): the write is
retried, and a run whose end still could not be written is ended by the reaper, so its
thread is reaped and its sandbox destroyed."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.compose import Runtime
from bot.run_events import RunFinished
from bot.sessions.engine import Engine
from bot.sessions.events import OutputsReady, RunStarted, SessionEvent
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.redis_server import RedisServer, redis_server
from tests.support import Recorder, file_chunks, settings_for

KEY = "T1:C1:300.1"


def script(req: Any) -> Reply:
    if req.tool_results():
        return Reply([text("done")])
    return Reply([tool_use("run_code", {"language": "python", "code": "print(6 * 7)"})])


class DbLock:
    """Another connection holding the store's write lock, from the moment a run has
    reported its outputs (the end write comes next) until released."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self.recorder = Recorder()

    def view(self, key: str) -> Recorder:
        return self  # type: ignore[return-value]

    async def __call__(self, event: SessionEvent) -> None:
        await self.recorder(event)
        if isinstance(event, OutputsReady):
            self._conn = sqlite3.connect(self._path, isolation_level=None, timeout=10)
            self._conn.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self._conn is not None:
            self._conn.execute("ROLLBACK")
            self._conn.close()
            self._conn = None


@asynccontextmanager
async def locked_engine(
    root: Path, **settings: Any
) -> AsyncIterator[tuple[Engine, SqliteStore, DbLock, Runtime]]:
    async with FakeAnthropic(script) as fake:
        runtime = Runtime.from_settings(
            settings_for(fake.base_url, root, session_idle_timeout=0.05, **settings)
        )
        path = root / "runs.db"
        store = SqliteStore(path, busy_timeout_ms=50)
        await store.open()
        lock = DbLock(path)
        engine = runtime.engine(store, lock.view, lambda source: file_chunks)
        try:
            yield engine, store, lock, runtime
        finally:
            lock.release()
            await engine.shutdown(0)
            await engine.close(KEY)
            await runtime.close()
            await store.close()


async def _until(condition: Any, timeout: float = 20) -> None:
    async with asyncio.timeout(timeout):
        while not await condition():  # noqa: ASYNC110 - state the engine changes
            await asyncio.sleep(0.02)


async def test_the_end_write_is_retried_until_the_store_answers(
    sandbox_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.sessions.engine")
    async with locked_engine(sandbox_root, run_end_attempts=20, run_end_retry_delay_s=0.05) as (
        engine,
        store,
        lock,
        _,
    ):
        answered = await engine.ask(KEY, "what is six times seven?", user="U1")

        async def retried() -> bool:
            return any("failed, retrying" in r.getMessage() for r in caplog.records)

        await _until(retried)
        lock.release()
        result = await answered
        run_id = lock.recorder.of(RunStarted)[0].run_id
        run = await store.get_run(run_id)
    assert isinstance(result, RunFinished)
    assert run is not None and run.outcome == "finished"


async def test_a_run_whose_end_was_never_written_is_ended_and_its_sandbox_reaped(
    sandbox_root: Path,
) -> None:
    async with locked_engine(
        sandbox_root, run_end_attempts=2, run_end_retry_delay_s=0.01, run_repair_grace_s=0
    ) as (engine, store, lock, runtime):
        await (await engine.ask(KEY, "what is six times seven?", user="U1"))
        sandbox_id = engine.sandbox_id(KEY)
        assert sandbox_id is not None
        lock.release()  # the blip is over, but the run's end was given up on
        run_id = lock.recorder.of(RunStarted)[0].run_id
        assert [r.run_id for r in await store.runs_in_flight()] == [run_id]

        async def reaped() -> bool:
            return KEY in await engine.reap()

        await _until(reaped)
        run = await store.get_run(run_id)
        record = await store.get_session(KEY)
        gone = await runtime.provider.attach(sandbox_id)
    assert run is not None and run.outcome == "interrupted"
    assert record is not None and record.sandbox_id is None
    assert engine.sandbox_id(KEY) is None and gone is None


class RedisBlip:
    """Stops the test's own redis-server once a run has reported its outputs (its end write
    comes next); `back` starts it again on the same port and data."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.recorder = Recorder()

    def view(self, key: str) -> Recorder:
        return self  # type: ignore[return-value]

    async def __call__(self, event: SessionEvent) -> None:
        await self.recorder(event)
        if isinstance(event, OutputsReady):
            await self.server.stop()


async def test_the_end_write_waits_out_a_redis_restart(
    sandbox_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.sessions.engine")
    async with FakeAnthropic(script) as fake, redis_server() as server:
        runtime = Runtime.from_settings(
            settings_for(fake.base_url, sandbox_root, run_end_attempts=20,
                         run_end_retry_delay_s=0.05)
        )  # fmt: skip
        store = RedisStore(server.url)
        await store.open()
        blip = RedisBlip(server)
        engine = runtime.engine(store, blip.view, lambda source: file_chunks)
        try:
            answered = await engine.ask(KEY, "what is six times seven?", user="U1")

            async def retried() -> bool:
                return any("failed, retrying" in r.getMessage() for r in caplog.records)

            await _until(retried)
            await server.start()
            result = await answered
            run = await store.get_run(blip.recorder.of(RunStarted)[0].run_id)
        finally:
            await engine.shutdown(0)
            await engine.close(KEY)
            await runtime.close()
            await store.close()
    assert isinstance(result, RunFinished)
    assert run is not None and run.outcome == "finished"
