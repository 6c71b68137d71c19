"""With replicas: runs whose replica died. A run is in flight in the store while its
thread's lease lapsed (the replica running it was killed, or stalled past its lease); the
replica that takes the thread over records the run as interrupted, tells the thread, and
asks its question again, with the thread's history, files and sandbox (`ask_again` says
when not). One replica looks at a time. Ending the cut runs is the engine's `adopt`, as for
a thread taken over at its next event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.coord.base import Coordinator
from bot.store.base import RunRecord, RunStore

log = logging.getLogger(__name__)

Adopt = Callable[[str], Awaitable[bool]]  # Engine.adopt: a thread taken over; True: a run goes
PASSES_PER_LEASE = 3  # with a 15 s lease: a dead replica's run is told within about 20 s
ASK_AGAIN_WITHIN_S = 3600.0  # an older question cut off (all replicas down a while) is not


async def end_cut_runs(store: RunStore, key: str, token: int, now: float) -> list[RunRecord]:
    """End the thread's runs still in flight (their replica is gone) as interrupted."""
    cut = [run for run in await store.runs_in_flight() if run.key == key]
    for run in cut:
        await store.end_run(run.run_id, "interrupted", now, token=token)
    return cut


async def ask_again(store: RunStore, run: RunRecord, now: float) -> bool:
    """Whether a cut run's question is asked again: not if someone stopped it, if it is
    old, or if it was cut once before (a question that takes its replica down is not
    retried from replica to replica)."""
    if run.stopped_by or now - run.started_at > ASK_AGAIN_WITHIN_S:
        return False
    earlier = [r for r in await store.runs(run.key) if r.run_id != run.run_id]
    return not any(r.outcome == "interrupted" and r.question == run.question for r in earlier)


async def take_over(store: RunStore, coord: Coordinator, adopt: Adopt) -> list[str]:
    """One pass; returns the keys taken over (their cut runs ended by `adopt`)."""
    if not await coord.job("takeover"):
        return []
    taken_over = []
    for key in {run.key for run in await store.runs_in_flight()}:
        _, taken = await coord.claim(key)
        if not taken:
            continue  # owned (here or by another replica): the run goes on there
        running = False
        try:
            running = await adopt(key)
            taken_over.append(key)
        finally:
            if not running:  # else it is let go once the thread goes quiet, as any other
                await coord.release(key)
    return taken_over


async def take_over_forever(store: RunStore, coord: Coordinator, adopt: Adopt) -> None:
    while True:
        try:
            await take_over(store, coord, adopt)
        except Exception:
            log.exception("taking over the runs of a dead replica failed")
        await asyncio.sleep(coord.lease_s / PASSES_PER_LEASE)
