"""The SQLite store's worker: jobs in order, writes queued together under one commit, each
write rolled back alone when it fails, and no caller told of a write before its commit."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.store.base import StoreError
from bot.store.sqlite_rows import integrity
from bot.store.sqlite_worker import StoreWorker

SCHEMA = """
CREATE TABLE parent (id INTEGER PRIMARY KEY);
CREATE TABLE item (id INTEGER PRIMARY KEY, parent INTEGER
    REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
"""


@asynccontextmanager
async def worker_on(path: Path) -> AsyncIterator[tuple[StoreWorker, list[str]]]:
    """A started worker on a fresh database, and the statements its connection ran."""
    statements: list[str] = []

    def opener() -> sqlite3.Connection:
        conn = sqlite3.connect(path, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(SCHEMA)
        conn.set_trace_callback(statements.append)
        return conn

    worker = StoreWorker(opener, lambda conn: conn.close(), integrity)
    await worker.start()
    try:
        yield worker, statements
    finally:
        await worker.stop()


def insert(item: int, parent: int | None = None) -> Callable[[sqlite3.Connection], None]:
    def write(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO item VALUES (?, ?)", (item, parent))

    return write


def vacuum(conn: sqlite3.Connection) -> None:
    conn.execute("VACUUM")


def items(conn: sqlite3.Connection) -> list[int]:
    return [row[0] for row in conn.execute("SELECT id FROM item ORDER BY id")]


@asynccontextmanager
async def held(worker: StoreWorker) -> AsyncIterator[None]:
    """The worker kept busy until the block ends, so that what is submitted in it queues."""
    busy, release = threading.Event(), threading.Event()

    def hold(_conn: sqlite3.Connection) -> None:
        busy.set()
        release.wait(10)

    holding = asyncio.ensure_future(worker.run(hold, write=False))
    await asyncio.to_thread(busy.wait, 10)
    try:
        yield
    finally:
        release.set()
        await holding


def begins(statements: list[str]) -> int:
    return sum(s == "BEGIN IMMEDIATE" for s in statements)


async def test_writes_queued_together_share_one_commit(tmp_path: Path) -> None:
    async with worker_on(tmp_path / "db") as (worker, statements):
        async with held(worker):
            writes = [asyncio.ensure_future(worker.run(insert(i), write=True)) for i in range(50)]
            await asyncio.sleep(0)  # submitted
        await asyncio.gather(*writes)
        assert await worker.run(items, write=False) == list(range(50))
    assert begins(statements) == 1


async def test_a_failing_write_is_rolled_back_alone(tmp_path: Path) -> None:
    async with worker_on(tmp_path / "db") as (worker, statements):
        async with held(worker):
            first = asyncio.ensure_future(worker.run(insert(1), write=True))
            again = asyncio.ensure_future(worker.run(insert(1), write=True))  # its key is taken
            third = asyncio.ensure_future(worker.run(insert(3), write=True))
            await asyncio.sleep(0)
        results = await asyncio.gather(first, again, third, return_exceptions=True)
        assert results[0] is None and results[2] is None
        assert isinstance(results[1], StoreError)  # translated, as any write's error is
        assert await worker.run(items, write=False) == [1, 3]
    assert begins(statements) == 1


async def test_a_commit_that_fails_fails_every_write_it_held(tmp_path: Path) -> None:
    """A deferred constraint is checked at the commit: no write of the group landed, none
    is reported as done, and the worker goes on."""
    async with worker_on(tmp_path / "db") as (worker, _):
        async with held(worker):
            fine = asyncio.ensure_future(worker.run(insert(1), write=True))
            orphan = asyncio.ensure_future(worker.run(insert(2, parent=99), write=True))
            await asyncio.sleep(0)
        results = await asyncio.gather(fine, orphan, return_exceptions=True)
        assert all(isinstance(r, sqlite3.IntegrityError) for r in results), results
        assert await worker.run(items, write=False) == []
        await worker.run(insert(5), write=True)
        assert await worker.run(items, write=False) == [5]


async def test_jobs_run_in_the_order_submitted_and_a_read_sees_the_writes_before_it(
    tmp_path: Path,
) -> None:
    async with worker_on(tmp_path / "db") as (worker, statements):
        async with held(worker):
            jobs: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(worker.run(insert(1), write=True)),
                asyncio.ensure_future(worker.run(items, write=False)),
                asyncio.ensure_future(worker.run(insert(2), write=True)),
                # VACUUM refuses to run inside a transaction: the writes before it commit first
                asyncio.ensure_future(worker.run(vacuum, write=False)),
                asyncio.ensure_future(worker.run(items, write=False)),
            ]
            await asyncio.sleep(0)
        results = await asyncio.gather(*jobs)
    assert results[1] == [1] and results[4] == [1, 2]
    assert begins(statements) == 2


async def test_a_cancelled_callers_write_still_lands(tmp_path: Path) -> None:
    async with worker_on(tmp_path / "db") as (worker, _):
        async with held(worker):
            write = asyncio.ensure_future(worker.run(insert(7), write=True))
            await asyncio.sleep(0)
            write.cancel()
        with pytest.raises(asyncio.CancelledError):
            await write
        assert await worker.run(items, write=False) == [7]


async def test_stop_comes_after_every_job_submitted(tmp_path: Path) -> None:
    async with worker_on(tmp_path / "db") as (worker, _):
        async with held(worker):
            last = asyncio.ensure_future(worker.run(insert(9), write=True))
            await asyncio.sleep(0)
            stopping = asyncio.ensure_future(worker.stop())
            await asyncio.sleep(0)
        await asyncio.gather(last, stopping)
    with sqlite3.connect(tmp_path / "db") as conn:
        assert items(conn) == [9]


async def test_an_opener_that_fails_is_raised_by_start(tmp_path: Path) -> None:
    def opener() -> sqlite3.Connection:
        raise sqlite3.OperationalError("unable to open database file")

    worker = StoreWorker(opener, lambda conn: conn.close(), integrity)
    with pytest.raises(sqlite3.OperationalError, match="unable to open"):
        await worker.start()


async def test_the_callers_of_a_large_group_are_woken_a_few_at_a_time(tmp_path: Path) -> None:
    """Many threads in step make large groups; waking every caller in one turn of the event
    loop would hold up everything else on it for that long."""
    turns = 0

    async def count_turns() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def write(i: int) -> int:
        await worker.run(insert(i), write=True)
        return turns  # the turn of the loop its caller resumed in

    async with worker_on(tmp_path / "db") as (worker, statements):
        counter = asyncio.ensure_future(count_turns())
        async with held(worker):
            writes = [asyncio.ensure_future(write(i)) for i in range(40)]
            await asyncio.sleep(0)
        woken_in = await asyncio.gather(*writes)
        counter.cancel()
    assert begins(statements) == 1
    assert len(set(woken_in)) >= 3, woken_in  # not all in one turn


async def test_a_call_from_another_event_loop_is_refused_not_left_unanswered(
    tmp_path: Path,
) -> None:
    async with worker_on(tmp_path / "db") as (worker, _):
        with pytest.raises(RuntimeError, match="event loop it was not opened in"):
            await asyncio.to_thread(asyncio.run, worker.run(items, write=False))
        assert await worker.run(items, write=False) == []
