"""With replicas: runs whose replica died. A run is in flight in the store while its
thread's lease lapsed (the replica running it was killed); the replica that takes the
thread over records the run as interrupted and tells the thread, whose next message is
then answered here with its history, files and sandbox. One replica looks at a time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from bot.coord.base import Coordinator
from bot.sessions.events import RunInterrupted, ViewFor
from bot.store.base import Store

log = logging.getLogger(__name__)

EVERY_S = 5.0  # with a 15 s lease: a dead replica's run is told within about 20 s


async def take_over(
    store: Store, coord: Coordinator, view_for: ViewFor, clock: Callable[[], float] = time.time
) -> list[str]:
    """One pass; returns the keys whose runs were ended as interrupted."""
    if not await coord.job("takeover"):
        return []
    ended = []
    for run in await store.runs_in_flight():
        _, taken = await coord.claim(run.key)
        if not taken:
            continue  # owned (here or by another replica): the run goes on there
        try:
            current = await store.get_run(run.run_id)
            if current is not None and current.outcome is None:
                await store.end_run(run.run_id, "interrupted", clock())
                await view_for(run.key)(RunInterrupted("restart"))
                ended.append(run.key)
        finally:
            await coord.release(run.key)
    return ended


async def take_over_forever(store: Store, coord: Coordinator, view_for: ViewFor) -> None:
    while True:
        try:
            await take_over(store, coord, view_for)
        except Exception:
            log.exception("taking over the runs of a dead replica failed")
        await asyncio.sleep(EVERY_S)
