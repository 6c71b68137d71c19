"""A key's session in this process, and the work it is doing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.run_events import RunFailed, RunFinished
from bot.sessions.session import Session

RunResult = RunFinished | RunFailed | None  # None: stopped, interrupted or never started
MayStop = Callable[[str], Awaitable[bool]]  # whether a stop may cancel this asker's question


@dataclass
class ThreadState:
    session: Session
    last_activity: float
    waiters: dict[int, asyncio.Future[RunResult]] = field(default_factory=dict)
    worker: asyncio.Task[None] | None = None
    current: asyncio.Task[RunResult] | None = None
    run_id: str | None = None
    token: int | None = None  # its fencing token (None: one process alone, nothing to fence)
    stopping: tuple[str, MayStop] | None = None  # a stop (who, and the check) before a start
    starting: bool = False  # the worker took questions whose run has not started yet

    @property
    def busy(self) -> bool:
        return self.worker is not None and not self.worker.done()

    @property
    def running(self) -> bool:
        return self.current is not None and not self.current.done()

    def stop_waiting(self, by: str, may_stop: MayStop) -> bool:
        """A stop when no run goes: the next run to start (from questions asked before it)
        is stopped, if `may_stop` its asker. False when no question is on its way."""
        if self.running or not (self.starting or self.waiters):
            return False
        self.stopping = (by, may_stop)
        return True

    async def stopped_before_start(self, asker: str) -> str | None:
        """Who stopped the run about to start for `asker` before it did, or None."""
        stopping, self.stopping = self.stopping, None
        if stopping is None or not await stopping[1](asker):
            return None
        return stopping[0]
