"""The engine: one thread of work per key, from question to outcome, for every front end.

A front end hands it questions (`ask`), Stop clicks (`stop`, or `stop_waiting` before a
run starts) and Continue clicks (`continue_run`), and renders what the engine reports
through the view it gave for the thread. The engine is the one way in; behind it,
`ThreadTable` holds the threads in memory, `RunWorker` runs each thread's questions, and
`Lifecycle` reattaches, reaps and drains.
What a restart or another process needs (sessions, history, files, runs, who stopped a run,
Continue allowances, waiting questions) is in the store; this process keeps only its tasks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from bot.datacard.data_file import DataFile
from bot.sessions.budget import Budgets
from bot.sessions.events import Observer, RunInterrupted, RunStopped, ViewFor
from bot.sessions.factory import SessionFactory
from bot.sessions.files import FileOpener
from bot.sessions.lifecycle import Claim, Lifecycle, Release, Upkeep, let_go_nothing
from bot.sessions.retry import Backoff
from bot.sessions.run import observed
from bot.sessions.run_worker import RunWorker
from bot.sessions.session import Session
from bot.sessions.snapshots import SnapshotKeeper
from bot.sessions.takeover import ask_again, end_cut_runs
from bot.sessions.thread import MayStop, RunResult
from bot.sessions.thread_table import OpenerFor, ThreadTable
from bot.store.base import Fenced, FileRecord, RunRecord, Store

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
        upkeep: Upkeep,
        end_retry: Backoff = END_RETRY,
        clock: Callable[[], float] = time.time,
        claim: Claim | None = None,
        release: Release | None = None,
        observers: Callable[[], Observer] | None = None,
        keeper: SnapshotKeeper | None = None,
    ) -> None:
        """`upkeep`: when quiet threads' sandboxes go. `claim` and `release`: how this
        process takes a thread it does not hold, to reap it, and lets it go after
        (replicas); alone, every thread is its own. `observers` makes what hears each
        view's events before it does (metrics)."""
        self._store = store
        self._budgets = budgets
        self._clock = clock
        if observers is not None:
            view_for = observed(view_for, observers)
        self._view_for = view_for
        self._threads = ThreadTable(store, sessions, opener_for, clock, keeper)
        self._runs = RunWorker(
            store, self._threads, view_for, budgets, release or let_go_nothing,
            end_retry=end_retry, clock=clock,
        )  # fmt: skip
        self._lifecycle = Lifecycle(
            self._threads, store, sessions.provider, view_for,
            upkeep=upkeep, live_runs=self._runs.live_runs, clock=clock,
            claim=claim, release=release, keeper=keeper,
        )  # fmt: skip

    @property
    def accepting(self) -> bool:
        """False once shutting down: no new work is taken."""
        return self._runs.accepting

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

    async def shutdown(self, grace_s: float) -> list[str]:
        """Stop taking work; running turns get `grace_s` to finish, the rest are interrupted
        (and told). Sessions keep their sandboxes for the next start. Returns the cut keys."""
        self._runs.accepting = False
        return await self._lifecycle.drain(grace_s)

    # -- threads --

    async def knows(self, key: str) -> bool:
        """Whether the bot works in this thread (here or, before a restart, anywhere)."""
        return key in self._threads or await self._store.get_session(key) is not None

    async def open(self, key: str, repo_url: str | None = None, *, start: bool = True) -> Session:
        """The key's session (made, or loaded from the store), its sandbox under way unless
        not `start`: a thread with no work yet costs no sandbox."""
        return (await self._threads.open(key, repo_url, start=start)).session

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
        return len(self._threads.keys())

    @property
    def runs_in_flight(self) -> int:
        """Runs going in this process now."""
        return self._threads.runs_in_flight

    @property
    def live_sandboxes(self) -> int:
        """Sandboxes this process's sessions hold: made, and not torn down or let go."""
        return self._threads.live_sandboxes

    async def add_file(
        self, key: str, name: str, opener: FileOpener, source: dict[str, Any]
    ) -> DataFile:
        """Take a file into the thread's sandbox, with its data card; `source` says how to
        fetch it again."""
        thread = await self._threads.touch(key)
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
        thread = self._threads.remove(key)
        if thread is not None:
            await thread.session.close(destroy=destroy)

    async def adopt(self, key: str) -> bool:
        """This process just took the thread over (with replicas: its lease was free, or
        its owner died): any copy held here is stale, and a run the store still has in
        flight was cut by its old owner, so it is ended as interrupted, the thread told,
        and its question asked again here (True: a run goes; see takeover.ask_again).
        First a new fencing token: from then on the store refuses the writes of any replica
        that still thinks it owns the thread (one paused past its lease, say)."""
        token = await self._store.fence(key)
        self._threads.take_token(key, token)
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
        return self._threads.token(key)

    async def ask(
        self, key: str, question: str, *, user: str, repo_url: str | None = None
    ) -> asyncio.Future[RunResult]:
        """Queue a question; it runs (joined with the same person's others waiting) once the
        thread is free. The future resolves with the outcome of the run that answered it.
        Fenced: the thread was taken over meanwhile (this copy is dropped; ask its owner)."""
        return await self._runs.ask(key, question, user=user, repo_url=repo_url)

    async def continue_run(
        self, key: str, user: str, grant_id: str
    ) -> asyncio.Future[RunResult] | None:
        """The Continue button: one more run's allowance for the thread, and the run goes on.
        Each button (`grant_id`) grants once, across replicas and restarts; None when
        nothing was granted (used before, unknown thread, shutting down)."""
        if not self.accepting or not await self.knows(key):
            return None
        try:
            granted = await self._store.grant_once(
                key, grant_id, self._budgets.run_usd, token=self.token(key)
            )
        except Fenced:
            await self._runs.let_go(key, self._threads.get(key))
            raise
        return await self.ask(key, CONTINUE_QUESTION, user=user) if granted else None

    def running(self, key: str) -> str | None:
        """The id of the run going in the thread in this process, or None."""
        return self._runs.running(key)

    async def stop(self, run_id: str, by: str) -> bool:
        """The Stop button: True if the run was still going."""
        return await self._runs.stop(run_id, by)

    async def stopped_before_start(self, key: str, by: str) -> None:
        """Tell the thread a question a front end had not asked yet was stopped."""
        await self._view_for(key)(RunStopped(by))

    def stop_waiting(self, key: str, by: str, may_stop: MayStop) -> bool:
        """A stop that came when no run goes: the run about to start from questions asked
        before it (taken from the queue, or still waiting there) does not start, if
        `may_stop` its asker (it tells anyone it refuses); the thread is told it was stopped.
        False when nothing is on its way here."""
        return self._runs.stop_waiting(key, by, may_stop)
