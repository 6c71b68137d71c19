"""A job the bot does now and then in the background (the orphan sweep, pruning): once at
start, then every interval; with replicas, only on this process's turn. A failed pass is
logged and the next one comes as usual."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self,
        what: str,
        work: Callable[[], Awaitable[object]],
        interval_s: float,
        turn: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._what, self._work, self._interval_s = what, work, interval_s
        self._turn = turn  # whether this process does it now (one replica does); None: always
        self._task: asyncio.Task[None] | None = None
        self._soon = asyncio.Event()  # set: the next pass comes now, not at the interval

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            try:
                if self._turn is None or await self._turn():
                    await self._work()
            except Exception:
                log.exception("%s failed", self._what)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._soon.wait(), self._interval_s)
            self._soon.clear()

    def soon(self) -> None:
        """Do the next pass now rather than at the end of the interval."""
        self._soon.set()
