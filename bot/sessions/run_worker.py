"""A thread's runs: its queue of questions, the lease around each run, running it, stopping.

Questions wait in the store while a run goes; the next run takes the oldest with those
right after it from the same person (joined), so each run is one asker's, and charged to
them. A write the store refuses (Fenced: another replica took the thread over) stops the
thread's work here without a word to the thread; its new owner tells it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from bot.sessions.budget import Budgets
from bot.sessions.events import BudgetSpent, RunStopped, ViewFor
from bot.sessions.lifecycle import Release
from bot.sessions.retry import Backoff
from bot.sessions.run import RecordingView, end_run, error_of, execute, outcome_of, refused
from bot.sessions.thread import MayStop, RunResult, ThreadState
from bot.sessions.thread_table import ThreadTable
from bot.store.base import Fenced, Store

log = logging.getLogger(__name__)


class RunWorker:
    def __init__(
        self,
        store: Store,
        threads: ThreadTable,
        view_for: ViewFor,
        budgets: Budgets,
        release: Release,
        *,
        end_retry: Backoff,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`release`: lets a thread's lease go (replicas) when it was taken over."""
        self._store = store
        self._threads = threads
        self._view_for = view_for
        self._budgets = budgets
        self._release = release
        self._end_retry = end_retry
        self._clock = clock
        self.live_runs: set[str] = set()  # run ids whose task is alive in this process
        self.accepting = True

    async def ask(
        self, key: str, question: str, *, user: str, repo_url: str | None = None
    ) -> asyncio.Future[RunResult]:
        """Queue a question; it runs once the thread is free (see `Engine.ask`)."""
        thread = await self._threads.touch(key, repo_url)
        try:
            queued_id = await self._store.enqueue(
                key, question, user, self._clock(), token=thread.token
            )
        except Fenced:
            await self.let_go(key, thread)
            raise
        waiter = thread.waiters[queued_id] = asyncio.get_running_loop().create_future()
        if not thread.busy:
            thread.worker = asyncio.create_task(self._work(key, thread))
        return waiter

    def running(self, key: str) -> str | None:
        """The id of the run going in the thread in this process, or None."""
        thread = self._threads.get(key)
        return thread.run_id if thread is not None and thread.running else None

    async def stop(self, run_id: str, by: str) -> bool:
        """The Stop button: True if the run was still going."""
        run = await self._store.request_stop(run_id, by)
        thread = self._threads.get(run.key) if run else None
        if thread is None or thread.run_id != run_id or thread.current is None:
            return False
        return thread.current.cancel()

    def stop_waiting(self, key: str, by: str, may_stop: MayStop) -> bool:
        """A stop when no run goes: the next run does not start (see `Engine.stop_waiting`)."""
        thread = self._threads.get(key)
        return thread is not None and thread.stop_waiting(by, may_stop)

    async def let_go(self, key: str, thread: ThreadState | None) -> None:
        """A write for the thread was refused: another replica took it over while this one
        was cut off (paused, or away from Redis, past its lease). Its run stops here without
        a word to the thread (the new owner tells it), and this stale copy is dropped."""
        log.warning("thread %s: taken over by another replica; stopping here", key)
        token = thread.token if thread is not None else self._threads.token(key)
        self._threads.forget_token(key, token)
        if thread is not None:
            await self._threads.drop_stale(key, thread)
        await self._release(key)  # if the lease is still ours (not likely)

    async def _work(self, key: str, thread: ThreadState) -> None:
        try:
            while self.accepting and (queued := await self._take(key, thread)):
                # thread.waiters: the questions still queued; these are on their way
                taken = [w for q in queued if (w := thread.waiters.pop(q.id, None))]
                thread.starting, result = True, None
                try:
                    question = "\n\n".join(q.question for q in queued)
                    result = await self._run(key, thread, question, queued[-1].user)
                finally:
                    thread.starting = False
                    for waiter in taken:
                        if not waiter.done():
                            waiter.set_result(result)
        except Fenced:
            await self.let_go(key, thread)
        except Exception:
            log.exception("the worker of %s failed", key)
        finally:
            thread.stopping = None  # a stop counts for questions asked before it
            for waiter in thread.waiters.values():
                if not waiter.done():
                    waiter.set_result(None)
            thread.waiters.clear()

    async def _take(self, key: str, thread: ThreadState) -> list[Any]:
        """The questions waiting. One asked while the store answered "none" found this worker
        busy and started none of its own: its waiter is new, so the queue is read again."""
        while True:
            known = set(thread.waiters)
            queued = await self._store.take_queued(key, token=thread.token)
            if queued or set(thread.waiters) <= known or not self.accepting:
                return queued

    async def _run(self, key: str, thread: ThreadState, question: str, user: str) -> RunResult:
        view = self._view_for(key)
        allowance = await self._budgets.allowance(self._store, key, user, self._clock())
        if isinstance(allowance, BudgetSpent):
            await view(allowance)
            return None
        if (stopped := await thread.stopped_before_start(user)) is not None:
            await view(RunStopped(stopped or None))
            return None
        thread.starting = False
        run_id = secrets.token_hex(6)
        await self._store.start_run(key, run_id, question, self._clock(), user, token=thread.token)
        self.live_runs.add(run_id)
        recorded = RecordingView(self._store, key, run_id, view, thread.token)
        thread.run_id = run_id
        try:
            thread.current = asyncio.create_task(
                execute(thread.session, question, recorded, allowance, run_id, user, self)
            )
            await asyncio.wait([thread.current])  # a Stop cancels the run, not the worker
            if refused(thread.current):  # its new owner ends the run: nothing to write here
                raise error_of(thread.current)
            result, outcome = outcome_of(thread.current, self.accepting)
            await end_run(self._store, run_id, outcome, thread.token, self._end_retry, self._clock)
        finally:
            self.live_runs.discard(run_id)
            thread.current = thread.run_id = None
            thread.last_activity = self._clock()
        return result
