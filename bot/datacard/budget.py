"""A time budget for one data card, checked by the readers as they go, and the thread pool
cards run in: a pool of their own, so that files written to be slow to card tie up at most
these threads, never the event loop's default executor (sandbox and Slack work)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

CARD_SECONDS = 30.0  # work on one card, at most
CARD_THREADS = 4  # cards profiled at once; more wait their turn (a stream at most its budget)
QUEUE_SECONDS = 300.0  # a card still waiting for a thread after this is given up
GRACE_SECONDS = 5.0  # past its budget, a card is given up even if its reader never checks

T = TypeVar("T")
_local = threading.local()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class OverBudget(Exception):
    """The card took longer than its budget, or never got a thread: it is given up. Not a
    CardError: the file itself is still taken in."""

    def __init__(self, seconds: float, started: bool = True) -> None:
        super().__init__(f"over {seconds:g} s")
        self.seconds, self.started = seconds, started

    @property
    def note(self) -> str:
        if not self.started:
            return "Not profiled: the bot was too busy profiling other files."
        return f"Profile stopped after {self.seconds:g} s: the file is in place, not profiled."


def check() -> None:
    """Raise OverBudget once the card running in this thread is past its time."""
    deadline = getattr(_local, "deadline", None)
    if deadline is not None and time.monotonic() > deadline[0]:
        raise OverBudget(deadline[1])


def within(seconds: float, work: Callable[..., T], *args: object) -> T:
    """`work(*args)` in this thread, its readers' `check()` calls failing past `seconds`."""
    outer = getattr(_local, "deadline", None)
    _local.deadline = (time.monotonic() + seconds, seconds)
    try:
        return work(*args)
    finally:
        _local.deadline = outer


def pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(CARD_THREADS, thread_name_prefix="datacard")
        return _pool


async def run(
    work: Callable[..., T],
    *args: object,
    seconds: float | None = None,
    queue_seconds: float | None = None,
) -> T:
    """`work(*args)` in the cards' pool within a budget of `seconds` of running (by default
    CARD_SECONDS). Raises OverBudget when it runs past it, whether or not the reader
    notices, or waits more than `queue_seconds` (QUEUE_SECONDS) for a thread."""
    seconds = CARD_SECONDS if seconds is None else seconds
    queue_seconds = QUEUE_SECONDS if queue_seconds is None else queue_seconds
    if seconds <= 0:
        raise OverBudget(seconds)
    loop = asyncio.get_running_loop()
    started = asyncio.Event()

    def job() -> T:
        loop.call_soon_threadsafe(started.set)
        return within(seconds, work, *args)

    future = asyncio.wrap_future(pool().submit(job))
    try:
        await asyncio.wait_for(started.wait(), queue_seconds)
    except TimeoutError:
        future.cancel()
        raise OverBudget(seconds, started=False) from None
    done, _ = await asyncio.wait([future], timeout=seconds + GRACE_SECONDS)
    if not done:  # the thread finishes on its own; nobody waits for it
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        raise OverBudget(seconds)
    return future.result()
