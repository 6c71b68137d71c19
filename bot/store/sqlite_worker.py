"""The SQLite store's one worker thread, with group commit.

Jobs run one at a time in the order they were submitted, on the thread's one connection.
Writes queued back to back share one transaction, each in a savepoint of its own: one sync
of the WAL (synchronous=FULL) for the lot instead of one each, and a write that fails is
rolled back alone, as if it had had its own transaction. A job's caller hears its result
only once the transaction that holds it is committed, so nothing the bot acts on can be
lost. A read, or a job that must not run in a transaction (VACUUM), waits for the writes
before it to commit, and runs alone. Results go back to the event loop a group at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bot.store.sqlite_schema import transaction

T = TypeVar("T")
MAX_BATCH = 64  # jobs taken off the queue at once: bounds how long the first one waits
SETTLE_AT_ONCE = 8  # callers woken per turn of the event loop


@dataclass
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    write: bool
    future: asyncio.Future[Any]
    outcome: tuple[Any, BaseException | None] = field(default=(None, None))


class StoreWorker:
    """Runs jobs on one connection, made by `opener` and closed by `closer`, both called on
    the worker's thread. `errors` wraps each write, translating its exceptions."""

    def __init__(
        self,
        opener: Callable[[], sqlite3.Connection],
        closer: Callable[[sqlite3.Connection], None],
        errors: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        self._opener, self._closer, self._errors = opener, closer, errors
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ended: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Start the thread and open the connection on it (the opener's error is raised)."""
        self._loop = loop = asyncio.get_running_loop()
        opened, self._ended = loop.create_future(), loop.create_future()
        threading.Thread(
            target=self._serve, args=(opened,), name="sqlite-store", daemon=True
        ).start()
        await opened

    async def stop(self) -> None:
        """Close the connection after every job already submitted (the closer's error is
        raised), and end the thread."""
        assert self._ended is not None, "the worker is not started"
        self._jobs.put(None)
        await self._ended

    async def run(self, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run `fn` with the connection; a write in a transaction. A cancelled caller stops
        waiting, but its job, once submitted, still runs."""
        if asyncio.get_running_loop() is not self._loop:
            raise RuntimeError("the store is used from an event loop it was not opened in")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put(_Job(fn, write, future))
        return await future

    # -- the worker's thread --

    def _serve(self, opened: asyncio.Future[None]) -> None:
        try:
            conn = self._opener()
        except BaseException as exc:
            self._hand_back(_settle_one, opened, exc)
            return
        self._hand_back(_settle_one, opened, None)
        try:
            self._work(conn)
        finally:
            self._hand_back(_settle_one, self._ended, _outcome(lambda: self._closer(conn))[1])

    def _work(self, conn: sqlite3.Connection) -> None:
        stopping = False
        while not stopping and (first := self._jobs.get()) is not None:
            batch = [first]
            while len(batch) < MAX_BATCH:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is None:
                    stopping = True
                    break
                batch.append(job)
            for group in _groups(batch):
                self._run_group(conn, group)
                self._hand_back(_settle, group)

    def _hand_back(self, fn: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is waiting
            self._loop.call_soon_threadsafe(fn, *args)

    def _run_group(self, conn: sqlite3.Connection, group: list[_Job]) -> None:
        """One job alone, or consecutive writes in one transaction."""
        if not group[0].write:
            group[0].outcome = _outcome(lambda: group[0].fn(conn))
            return
        try:
            with transaction(conn):
                for job in group:
                    job.outcome = self._savepoint(conn, job)
        except Exception as exc:  # no transaction, or no commit (rolled back): none landed
            for job in group:
                job.outcome = (None, job.outcome[1] or exc)

    def _savepoint(self, conn: sqlite3.Connection, job: _Job) -> tuple[Any, BaseException | None]:
        conn.execute("SAVEPOINT job")
        outcome = _outcome(lambda: self._guarded(conn, job))
        if outcome[1] is not None:
            conn.execute("ROLLBACK TO job")
        conn.execute("RELEASE job")
        return outcome

    def _guarded(self, conn: sqlite3.Connection, job: _Job) -> Any:
        with self._errors():
            return job.fn(conn)


def _groups(batch: list[_Job]) -> Iterator[list[_Job]]:
    """The batch cut into runs of consecutive writes, and each other job alone."""
    group: list[_Job] = []
    for job in batch:
        if job.write:
            group.append(job)
            continue
        if group:
            yield group
            group = []
        yield [job]
    if group:
        yield group


def _outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return call(), None
    except Exception as exc:
        return None, exc


def _settle_one(future: asyncio.Future[None] | None, error: BaseException | None) -> None:
    if future is not None:
        _resolve(future, None, error)


def _settle(batch: list[_Job]) -> None:
    """Wake the callers a few at a time: a group of many writes (many threads, in step)
    would otherwise resume them all in one turn of the loop, and hold up everything else."""
    if len(batch) > SETTLE_AT_ONCE:
        asyncio.get_running_loop().call_soon(_settle, batch[SETTLE_AT_ONCE:])
        batch = batch[:SETTLE_AT_ONCE]
    for job in batch:
        _resolve(job.future, *job.outcome)


def _resolve(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():
        return  # its caller was cancelled
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
