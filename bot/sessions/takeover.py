"""With replicas: runs whose replica died. A run is in flight in the store while its
thread's lease lapsed (the replica running it was killed); the replica that takes the
thread over records the run as interrupted and tells the thread, whose next message is
then answered here with its history, files and sandbox. One replica looks at a time.
Ending the cut runs is the engine's `adopt`, as for a thread taken over at its next event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from bot.coord.base import Coordinator
from bot.store.base import Store

log = logging.getLogger(__name__)

Adopt = Callable[[str], Awaitable[None]]  # Engine.adopt: a thread taken over
PASSES_PER_LEASE = 3  # with a 15 s lease: a dead replica's run is told within about 20 s


async def take_over(store: Store, coord: Coordinator, adopt: Adopt) -> list[str]:
    """One pass; returns the keys taken over (their cut runs ended by `adopt`)."""
    if not await coord.job("takeover"):
        return []
    taken_over = []
    for key in {run.key for run in await store.runs_in_flight()}:
        _, taken = await coord.claim(key)
        if not taken:
            continue  # owned (here or by another replica): the run goes on there
        try:
            await adopt(key)
            taken_over.append(key)
        finally:
            await coord.release(key)
    return taken_over


async def take_over_forever(store: Store, coord: Coordinator, adopt: Adopt) -> None:
    while True:
        try:
            await take_over(store, coord, adopt)
        except Exception:
            log.exception("taking over the runs of a dead replica failed")
        await asyncio.sleep(coord.lease_s / PASSES_PER_LEASE)
