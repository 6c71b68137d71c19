"""Sessions by conversation key: one run at a time per key, idle sandboxes reaped, and
everything a restart needs kept in the store.

Questions that arrive while a run is going wait, and are joined into the next turn.
Different keys run concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.agent.events import Event, ModelTurn, Reporter, ToolCallFinished, ToolCallStarted
from bot.agent.prompt import DataFile
from bot.runtime import Runtime
from bot.sessions.files import FileOpener
from bot.sessions.session import Intake, Session
from bot.store.base import FileRecord, RunRecord, SessionRecord, Store, ToolCallRecord

log = logging.getLogger(__name__)

RunFn = Callable[[Session, str, Reporter], Awaitable[None]]
IdleFn = Callable[[Session], Awaitable[None]]
OpenerFor = Callable[[dict[str, Any]], FileOpener]


@dataclass
class _Thread:
    session: Session
    pending: list[str] = field(default_factory=list)
    run: RunFn | None = None
    user: str = ""  # who asked the newest question, for per-user budgets
    worker: asyncio.Task[None] | None = None
    current: asyncio.Task[None] | None = None
    last_activity: float = field(default_factory=time.time)


class SessionManager:
    def __init__(
        self,
        runtime: Runtime,
        store: Store,
        *,
        idle_timeout_s: float,
        on_idle: IdleFn,
        opener_for: OpenerFor,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._runtime = runtime
        self._store = store
        self._idle_timeout_s = idle_timeout_s
        self._on_idle = on_idle
        self._opener_for = opener_for
        self._clock = clock
        self._threads: dict[str, _Thread] = {}
        self._known: dict[str, SessionRecord] = {}  # stored sessions not opened yet
        self._reaper: asyncio.Task[None] | None = None
        self.accepting = True

    # -- sessions --

    def get(self, key: str) -> Session | None:
        thread = self._threads.get(key)
        return thread.session if thread else None

    def knows(self, key: str) -> bool:
        return key in self._threads or key in self._known

    async def open(self, key: str, repo_url: str | None = None) -> Session:
        """The key's session (from the store after a restart), its sandbox under way."""
        thread = self._threads.get(key)
        if thread is None:
            thread = self._threads[key] = await self._load(key, repo_url)
        thread.session.start()
        await self.touch(key)
        return thread.session

    async def touch(self, key: str) -> None:
        if thread := self._threads.get(key):
            thread.last_activity = self._clock()
            await self._store.update_session(key, last_activity=thread.last_activity)

    async def add_file(
        self, key: str, name: str, opener: FileOpener, source: dict[str, Any]
    ) -> DataFile:
        intake = await self._threads[key].session.add_file(name, opener)
        record = FileRecord(
            str(source.get("id", "")), name, intake.file.size, intake.sha256,
            intake.file.path, {**source, "header": intake.file.header},
        )  # fmt: skip
        await self._store.add_file(key, record)
        return intake.file

    # -- runs --

    def submit(self, key: str, question: str, run: RunFn, user: str = "") -> None:
        """Queue a question; the key's worker runs it (joined with any others waiting)."""
        thread = self._threads[key]
        thread.pending.append(question)
        thread.run, thread.user = run, user
        thread.last_activity = self._clock()
        if thread.worker is None or thread.worker.done():
            thread.worker = asyncio.create_task(self._work(key, thread))

    def busy(self, key: str) -> bool:
        thread = self._threads.get(key)
        return bool(thread and (thread.pending or (thread.current and not thread.current.done())))

    def stop(self, key: str) -> bool:
        """Cancel the key's running run (the Stop button); True if there was one."""
        thread = self._threads.get(key)
        if thread is None or thread.current is None or thread.current.done():
            return False
        thread.current.cancel()
        return True

    # -- lifecycle --

    async def restore(self) -> list[RunRecord]:
        """After a start: reattach the sandboxes that still exist, forget those that do not,
        and return the runs a crash interrupted (their threads should be told)."""
        for record in await self._store.list_sessions():
            if record.state == "active" and record.sandbox_id:
                sandbox = await self._runtime.provider.attach(record.sandbox_id)
                if sandbox is not None:
                    thread = self._threads[record.key] = await self._load(record.key, None)
                    thread.session.adopt(sandbox, thread.session.intakes)
                    thread.last_activity = record.last_activity
                    continue
                await self._store.update_session(record.key, sandbox_id=None, state="closed")
                record = await self._store.get_session(record.key) or record
            self._known[record.key] = record
        interrupted = await self._store.runs_in_flight()
        for run in interrupted:
            await self._store.end_run(run.run_id, "interrupted", self._clock())
        return interrupted

    async def spent(self, key: str, user: str, since: float) -> tuple[float, float]:
        """USD spent so far in this thread, and by this user since `since`."""
        return await self._store.spent(key=key), await self._store.spent(user=user, since=since)

    def owned_sandbox_ids(self) -> set[str]:
        live = {t.session.sandbox_id for t in self._threads.values() if t.session.sandbox_id}
        return live | {r.sandbox_id for r in self._known.values() if r.sandbox_id}

    def start_reaper(self, interval_s: float | None = None) -> None:
        if self._reaper is None:
            every = interval_s or max(0.5, min(30.0, self._idle_timeout_s / 4))
            self._reaper = asyncio.create_task(self._reap_forever(every))

    async def reap(self) -> list[str]:
        """Suspend the sandboxes of keys quiet for longer than the idle timeout."""
        now, reaped = self._clock(), []
        for key, thread in list(self._threads.items()):
            quiet = now - thread.last_activity >= self._idle_timeout_s
            if quiet and not self.busy(key) and thread.session.sandbox_id is not None:
                await thread.session.suspend()
                await self._store.update_session(key, state="idle")
                reaped.append(key)
                try:
                    await self._on_idle(thread.session)
                except Exception:
                    log.exception("telling %s about its idle teardown failed", key)
        return reaped

    async def shutdown(self, grace_s: float) -> list[str]:
        """Stop taking work; let running turns finish within `grace_s`, cancel the rest
        (recorded as interrupted). Idle sessions keep their sandboxes for the next start.
        Returns the keys whose runs were interrupted."""
        self.accepting = False
        if self._reaper is not None:
            self._reaper.cancel()
        for thread in self._threads.values():
            thread.pending.clear()
        running = {
            key: t.current for key, t in self._threads.items() if t.current and not t.current.done()
        }
        if running:
            await asyncio.wait(running.values(), timeout=grace_s)
        cut = [key for key, task in running.items() if not task.done()]
        for key in cut:
            self._threads[key].current.cancel()  # type: ignore[union-attr]
        workers = [t.worker for t in self._threads.values() if t.worker]
        await asyncio.gather(*workers, return_exceptions=True)
        return cut

    # -- internals --

    async def _load(self, key: str, repo_url: str | None) -> _Thread:
        record = self._known.pop(key, None) or await self._store.get_session(key)
        now = self._clock()
        if record is None:
            team, channel, thread_ts = [*key.split(":", 2), "", ""][:3]
            record = SessionRecord(
                key, team, channel, thread_ts, None, "active", repo_url, now, now
            )
            await self._store.save_session(record)
        session = self._runtime.new_session(key, repo_url=record.repo_url)
        session.on_sandbox = lambda sandbox_id, key=key: self._sandbox_changed(key, sandbox_id)
        history = await self._store.load_history(key)
        if history:
            session.agent.restore(history)
        session.agent.checkpoint = lambda history, key=key: self._store.save_history(key, history)
        intakes = [self._intake(f) for f in await self._store.files(key)]
        if intakes:
            session.remember(intakes)
        return _Thread(session, last_activity=now)

    def _intake(self, file: FileRecord) -> Intake:
        header = str(file.source.get("header", ""))
        data = DataFile(path=file.sandbox_path, size=file.size, header=header)
        return Intake(file.name, data, self._opener_for(file.source), file.sha256)

    async def _sandbox_changed(self, key: str, sandbox_id: str | None) -> None:
        state = "active" if sandbox_id else "idle"
        await self._store.update_session(key, sandbox_id=sandbox_id, state=state)

    async def _work(self, key: str, thread: _Thread) -> None:
        while thread.pending:
            question = "\n\n".join(thread.pending)
            thread.pending.clear()
            assert thread.run is not None
            run_id = secrets.token_hex(6)
            await self._store.start_run(key, run_id, question, self._clock(), thread.user)
            audit = _Audit(self._store, key, run_id)
            thread.current = asyncio.create_task(thread.run(thread.session, question, audit))
            await asyncio.wait([thread.current])  # a Stop cancels the run, not the worker
            await self._store.end_run(run_id, self._outcome(key, thread.current), self._clock())
            thread.last_activity = self._clock()

    def _outcome(self, key: str, task: asyncio.Task[None]) -> str:
        if task.cancelled():
            return "stopped" if self.accepting else "interrupted"
        if task.exception():
            log.error("run in %s failed", key, exc_info=task.exception())
            return "failed"
        return "finished"

    async def _reap_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.reap()
            except Exception:
                log.exception("reaping idle sessions failed")


class _Audit:
    """Records each model turn's usage and each tool call; the run's reporter wraps it."""

    def __init__(self, store: Store, key: str, run_id: str) -> None:
        self._store, self._key, self._run_id = store, key, run_id
        self._started: dict[str, ToolCallStarted] = {}

    async def __call__(self, event: Event) -> None:
        match event:
            case ModelTurn():
                await self._store.add_turn(
                    self._key, self._run_id, event.usage.to_dict(), event.cost_usd, time.time()
                )
            case ToolCallStarted():
                self._started[event.call_id] = event
            case ToolCallFinished():
                started = self._started.pop(event.call_id, None)
                await self._store.add_tool_call(self._key, ToolCallRecord(
                    self._run_id, event.call_id, event.tool,
                    started.language if started else None, started.code if started else "",
                    event.status, event.exit_code, event.duration_s, event.excerpt, time.time(),
                ))  # fmt: skip
