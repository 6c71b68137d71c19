"""Sessions by conversation key: one run at a time per key, idle sandboxes reaped.

Questions that arrive while a run is going wait, and are joined into the next turn.
Different keys run concurrently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.runtime import Runtime
from bot.sessions.session import Session

log = logging.getLogger(__name__)

RunFn = Callable[[Session, str], Awaitable[None]]
IdleFn = Callable[[Session], Awaitable[None]]


@dataclass
class _Thread:
    session: Session
    pending: list[str] = field(default_factory=list)
    run: RunFn | None = None
    worker: asyncio.Task[None] | None = None
    current: asyncio.Task[None] | None = None
    last_activity: float = field(default_factory=time.monotonic)


class SessionManager:
    def __init__(
        self,
        runtime: Runtime,
        *,
        idle_timeout_s: float,
        on_idle: IdleFn,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runtime = runtime
        self._idle_timeout_s = idle_timeout_s
        self._on_idle = on_idle
        self._clock = clock
        self._threads: dict[str, _Thread] = {}
        self._reaper: asyncio.Task[None] | None = None

    def get(self, key: str) -> Session | None:
        thread = self._threads.get(key)
        return thread.session if thread else None

    def open(self, key: str, repo_url: str | None = None) -> Session:
        """The key's session, created (and its sandbox started) if it is new."""
        thread = self._threads.get(key)
        if thread is None:
            session = self._runtime.new_session(key, repo_url=repo_url)
            thread = self._threads[key] = _Thread(session, last_activity=self._clock())
        thread.session.start()
        self.touch(key)
        return thread.session

    def touch(self, key: str) -> None:
        if thread := self._threads.get(key):
            thread.last_activity = self._clock()

    def submit(self, key: str, question: str, run: RunFn) -> None:
        """Queue a question; the key's worker runs it (joined with any others waiting)."""
        thread = self._threads[key]
        thread.pending.append(question)
        thread.run = run
        self.touch(key)
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

    def start_reaper(self, interval_s: float | None = None) -> None:
        if self._reaper is None:
            every = interval_s or max(1.0, min(30.0, self._idle_timeout_s / 4))
            self._reaper = asyncio.create_task(self._reap_forever(every))

    async def reap(self) -> list[str]:
        """Suspend the sandboxes of keys quiet for longer than the idle timeout."""
        now, reaped = self._clock(), []
        for key, thread in list(self._threads.items()):
            quiet = now - thread.last_activity >= self._idle_timeout_s
            if quiet and not self.busy(key) and thread.session.sandbox_id is not None:
                await thread.session.suspend()
                reaped.append(key)
                try:
                    await self._on_idle(thread.session)
                except Exception:
                    log.exception("telling %s about its idle teardown failed", key)
        return reaped

    async def close(self) -> None:
        """Cancel every run and destroy every sandbox."""
        if self._reaper is not None:
            self._reaper.cancel()
        for thread in self._threads.values():
            thread.pending.clear()
            if thread.current is not None:
                thread.current.cancel()
        workers = [t.worker for t in self._threads.values() if t.worker]
        await asyncio.gather(*workers, return_exceptions=True)
        await asyncio.gather(
            *(t.session.close() for t in self._threads.values()), return_exceptions=True
        )

    async def _work(self, key: str, thread: _Thread) -> None:
        while thread.pending:
            question = "\n\n".join(thread.pending)
            thread.pending.clear()
            assert thread.run is not None
            thread.current = asyncio.create_task(thread.run(thread.session, question))
            await asyncio.wait([thread.current])  # a Stop cancels the run, not the worker
            if not thread.current.cancelled() and thread.current.exception():
                log.error("run in %s failed", key, exc_info=thread.current.exception())
            self.touch(key)

    async def _reap_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.reap()
            except Exception:
                log.exception("reaping idle sessions failed")
