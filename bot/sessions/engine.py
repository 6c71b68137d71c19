"""The engine: one thread of work per key, from question to outcome, for every front end.

A front end hands it questions (`ask`), Stop clicks (`stop`, or `stop_waiting` before a
run starts) and Continue clicks (`continue_run`), and renders what the engine reports
through the view it gave for the thread. Questions wait in the store while a run goes; the
next run takes the oldest with those right after it from the same person (joined), so each
run is one asker's, and charged to them.
What a restart or another process needs (sessions, history, files, runs, who stopped a run,
Continue allowances, waiting questions) is in the store; this process keeps only its tasks.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from bot.agent.prompt import DataFile
from bot.datacard import DataCard
from bot.sessions.budget import Budgets
from bot.sessions.events import (
    BudgetSpent,
    Observer,
    RunInterrupted,
    RunStopped,
    ViewFor,
)
from bot.sessions.factory import SessionFactory
from bot.sessions.files import FileOpener
from bot.sessions.lifecycle import Claim, IdleAction, Lifecycle, Release
from bot.sessions.retry import Backoff
from bot.sessions.run import (
    RecordingView,
    end_run,
    error_of,
    execute,
    observed,
    outcome_of,
    refused,
)
from bot.sessions.session import Intake, Session
from bot.sessions.takeover import ask_again, end_cut_runs
from bot.sessions.thread import MayStop, RunResult, ThreadState
from bot.store.base import Fenced, FileRecord, RunOutcome, RunRecord, SessionRecord, Store

log = logging.getLogger(__name__)

OpenerFor = Callable[[dict[str, Any]], FileOpener]  # a stored file source -> its bytes again
CONTINUE_QUESTION = "Continue where you stopped."
END_RETRY = Backoff()  # writing a run's end: 5 tries over about 8 s


class Engine:
    def __init__(
        self,
        store: Store,
        sessions: SessionFactory,
        view_for: ViewFor,
        opener_for: OpenerFor,
        *,
        budgets: Budgets,
        idle_timeout_s: float,
        idle_action: IdleAction = "delete",
        retain_s: float = 86_400,
        end_retry: Backoff = END_RETRY,
        repair_grace_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        claim: Claim | None = None,
        release: Release | None = None,
        observers: Callable[[], Observer] | None = None,
    ) -> None:
        """`claim` and `release`: how this process takes a thread it does not hold, to reap
        it, and lets it go after (replicas); alone, every thread is its own. `observers`
        makes what hears each view's events before it does (metrics)."""
        self._store = store
        self._sessions = sessions
        if observers is not None:
            view_for = observed(view_for, observers)
        self._view_for = view_for
        self._opener_for = opener_for
        self._budgets = budgets
        self._clock = clock
        self._threads: dict[str, ThreadState] = {}
        self._end_retry = end_retry
        self._live_runs: set[str] = set()  # run ids whose task is alive in this process
        # key -> the fencing token taken when this process last took the thread over; kept
        # while the thread leaves memory (its lease may still be held here)
        self._tokens: dict[str, int] = {}
        self.accepting = True
        self._lifecycle = Lifecycle(
            self._threads, self._load, store, sessions.provider, view_for,
            idle_timeout_s=idle_timeout_s, idle_action=idle_action, retain_s=retain_s,
            live_runs=self._live_runs, repair_grace_s=repair_grace_s, clock=clock,
            claim=claim, release=release,
        )  # fmt: skip

    # -- lifecycle: what a front end starts, and what it is told --

    async def restore(self) -> list[RunRecord]:
        """At start: the runs a crash cut off, ended as interrupted (tell them with
        `tell_interrupted` once connected)."""
        return await self._lifecycle.restore()

    async def tell_interrupted(self, runs: list[RunRecord]) -> None:
        await self._lifecycle.tell_interrupted(runs)

    def start_reaper(self, interval_s: float | None = None) -> None:
        """Shut quiet threads' sandboxes down, in the background, until shutdown."""
        self._lifecycle.start_reaper(interval_s)

    async def reap(self) -> list[str]:
        """One pass of the reaper now: the keys whose sandbox it shut down."""
        return await self._lifecycle.reap()

    async def owned_sandbox_ids(self) -> set[str]:
        """Sandboxes some thread still holds (the orphan sweeper leaves them)."""
        return await self._lifecycle.owned_sandbox_ids()

    # -- threads --

    async def knows(self, key: str) -> bool:
        """Whether the bot works in this thread (here or, before a restart, anywhere)."""
        return key in self._threads or await self._store.get_session(key) is not None

    async def open(self, key: str, repo_url: str | None = None, *, start: bool = True) -> Session:
        """The key's session (made, or loaded from the store), its sandbox under way unless
        not `start`: a thread with no work yet costs no sandbox."""
        thread = self._threads.get(key)
        if thread is None:
            thread = self._threads[key] = await self._load(key, repo_url)
        if start:
            thread.session.start()
        thread.last_activity = self._clock()
        await self._store.update_session(
            key, last_activity=thread.last_activity, token=thread.token
        )
        return thread.session

    def sandbox_id(self, key: str) -> str | None:
        thread = self._threads.get(key)
        return thread.session.sandbox_id if thread else None

    async def file_count(self, key: str) -> int:
        """Files the thread took in, whether or not it is in memory now."""
        thread = self._threads.get(key)
        return len(thread.session.intakes) if thread else len(await self._store.files(key))

    @property
    def threads_in_memory(self) -> int:
        """Threads this process holds now (a reaped one is loaded again when needed)."""
        return len(self._threads)

    @property
    def runs_in_flight(self) -> int:
        """Runs going in this process now."""
        return sum(thread.running for thread in self._threads.values())

    @property
    def live_sandboxes(self) -> int:
        """Sandboxes this process's sessions hold: made, and not torn down or let go."""
        return sum(t.session.sandbox_id is not None for t in self._threads.values())

    async def add_file(
        self, key: str, name: str, opener: FileOpener, source: dict[str, Any]
    ) -> DataFile:
        """Take a file into the thread's sandbox, with its data card; `source` says how to
        fetch it again."""
        thread = await self._thread(key)
        intake = await thread.session.add_file(name, opener)
        record = FileRecord(
            str(source.get("id", "")), name, intake.file.size, intake.sha256,
            intake.file.path, {**source, "header": intake.file.header},
            [card.to_dict() for card in intake.file.cards],
        )  # fmt: skip
        await self._store.add_file(key, record, token=thread.token)
        return intake.file

    async def close(self, key: str, *, destroy: bool = True) -> None:
        """Let go of a thread's session: its sandbox destroyed, or kept for a later resume."""
        thread = self._threads.pop(key, None)
        if thread is not None:
            await thread.session.close(destroy=destroy)

    async def adopt(self, key: str) -> bool:
        """This process just took the thread over (with replicas: its lease was free, or
        its owner died): any copy held here is stale, and a run the store still has in
        flight was cut by its old owner, so it is ended as interrupted, the thread told,
        and its question asked again here (True: a run goes; see takeover.ask_again).
        First a new fencing token: from then on the store refuses the writes of any replica
        that still thinks it owns the thread (one paused past its lease, say)."""
        token = self._tokens[key] = await self._store.fence(key)
        await self.close(key, destroy=False)
        again = False
        for run in await end_cut_runs(self._store, key, token, self._clock()):
            retry = self.accepting and await ask_again(self._store, run, self._clock())
            await self._view_for(key)(RunInterrupted("retried" if retry else "restart"))
            if retry:
                await self.ask(key, run.question, user=run.user)
            again = again or retry
        return again

    # -- runs --

    def token(self, key: str) -> int | None:
        """The fencing token this process's writes for the thread carry (None: unfenced)."""
        thread = self._threads.get(key)
        return thread.token if thread is not None else self._tokens.get(key)

    async def ask(
        self, key: str, question: str, *, user: str, repo_url: str | None = None
    ) -> asyncio.Future[RunResult]:
        """Queue a question; it runs (joined with the same person's others waiting) once the
        thread is free. The future resolves with the outcome of the run that answered it.
        Fenced: the thread was taken over meanwhile (this copy is dropped; ask its owner)."""
        thread = await self._thread(key, repo_url)
        try:
            queued_id = await self._store.enqueue(
                key, question, user, self._clock(), token=thread.token
            )
        except Fenced:
            await self._let_go(key, thread)
            raise
        waiter = thread.waiters[queued_id] = asyncio.get_running_loop().create_future()
        if not thread.busy:
            thread.worker = asyncio.create_task(self._work(key, thread))
        return waiter

    async def continue_run(
        self, key: str, user: str, grant_id: str
    ) -> asyncio.Future[RunResult] | None:
        """The Continue button: one more run's allowance for the thread, and the run goes on.
        Each button (`grant_id`) grants once, across replicas and restarts; None when
        nothing was granted (used before, unknown thread, shutting down)."""
        if not self.accepting or not await self.knows(key):
            return None
        thread = self._threads.get(key)
        try:
            granted = await self._store.grant_once(
                key, grant_id, self._budgets.run_usd, token=self.token(key)
            )
        except Fenced:
            await self._let_go(key, thread)
            raise
        return await self.ask(key, CONTINUE_QUESTION, user=user) if granted else None

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

    async def stopped_before_start(self, key: str, by: str) -> None:
        """Tell the thread a question a front end had not asked yet was stopped."""
        await self._view_for(key)(RunStopped(by))

    def stop_waiting(self, key: str, by: str, may_stop: MayStop) -> bool:
        """A stop that came when no run goes: the run about to start from questions asked
        before it (taken from the queue, or still waiting there) does not start, if
        `may_stop` its asker (it tells anyone it refuses); the thread is told it was stopped.
        False when nothing is on its way here."""
        thread = self._threads.get(key)
        return thread is not None and thread.stop_waiting(by, may_stop)

    async def shutdown(self, grace_s: float) -> list[str]:
        """Stop taking work; running turns get `grace_s` to finish, the rest are interrupted
        (and told). Sessions keep their sandboxes for the next start. Returns the cut keys."""
        self.accepting = False
        return await self._lifecycle.drain(grace_s)

    # -- internals --

    async def _thread(self, key: str, repo_url: str | None = None) -> ThreadState:
        """The key's thread, opened if it is not yet; one the front end opened already is
        only touched in memory (`open` has recorded the activity)."""
        thread = self._threads.get(key)
        if thread is None:
            await self.open(key, repo_url)
            return self._threads[key]
        thread.session.start()
        thread.last_activity = self._clock()
        return thread

    async def _load(self, key: str, repo_url: str | None = None) -> ThreadState:
        record = await self._store.get_session(key)
        now = self._clock()
        if record is None:
            team, channel, thread_ts = [*key.split(":", 2), "", ""][:3]
            record = SessionRecord(
                key, team, channel, thread_ts, None, "active", repo_url, now, now
            )
            await self._store.save_session(record)
        token = self._tokens.get(key)  # this copy's writes carry it, even after a take-over
        session = self._sessions.new(
            key,
            record.repo_url,
            history=await self._store.load_history(key),
            checkpoint=lambda history, archive: self._store.save_history(
                key, history, token=token, archive=archive
            ),
            on_sandbox=lambda sandbox_id: self._sandbox_changed(key, sandbox_id, token),
        )
        intakes = [self._intake(f) for f in await self._store.files(key)]
        sandbox = await self._lifecycle.attach(record, token)
        if sandbox is not None:
            session.adopt(sandbox, intakes)
        elif intakes:
            session.remember(intakes)
        last = record.last_activity if sandbox else now
        return ThreadState(session, last_activity=last, token=token)

    def _intake(self, file: FileRecord) -> Intake:
        header = str(file.source.get("header", ""))
        cards = tuple(DataCard.from_dict(card) for card in file.cards)
        data = DataFile(file.sandbox_path, file.size, header, cards)
        return Intake(file.name, data, self._opener_for(file.source), file.sha256)

    async def _sandbox_changed(self, key: str, sandbox_id: str | None, token: int | None) -> None:
        state = "active" if sandbox_id else "idle"
        await self._store.update_session(key, sandbox_id=sandbox_id, state=state, token=token)

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
            await self._let_go(key, thread)
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
        self._live_runs.add(run_id)
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
            await self._end_run(run_id, outcome, thread.token)
        finally:
            self._live_runs.discard(run_id)
            thread.current = thread.run_id = None
            thread.last_activity = self._clock()
        return result

    async def _let_go(self, key: str, thread: ThreadState | None) -> None:
        """A write for the thread was refused: another replica took it over while this one
        was cut off (paused, or away from Redis, past its lease). Its run stops here without
        a word to the thread (the new owner tells it), and this stale copy is dropped."""
        log.warning("thread %s: taken over by another replica; stopping here", key)
        token = thread.token if thread is not None else self._tokens.get(key)
        if self._tokens.get(key) == token:
            self._tokens.pop(key, None)
        if thread is not None:
            await self._lifecycle.drop_stale(key, thread)
        await self._lifecycle.release(key)  # if the lease is still ours (not likely)

    async def _end_run(self, run_id: str, outcome: RunOutcome, token: int | None) -> None:
        await end_run(self._store, run_id, outcome, token, self._end_retry, self._clock)
