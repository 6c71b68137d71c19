"""`python -m bot schedules list|run-now ID`, for operators: the stored schedules (state,
owner, the schedule in words with its next firing, the last firing's outcome), and a firing
asked for now, which the next tick of a running bot fires, once."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bot.errors import ConfigError
from bot.schedules.cadence import Cadence
from bot.store.base import NotFound, Store
from bot.terminal.printable import printable


async def list_schedules(store: Store) -> int:
    records = await store.list_schedules()
    if not records:
        print("No schedules.")
        return 0
    now = datetime.fromtimestamp(time.time(), UTC)
    for r in records:
        last = await store.firings(r.id, limit=1)
        outcome = f"last: {last[0].outcome or 'running'}" if last else "never fired"
        words = Cadence(r.cron, r.zone).words(now)
        why = f" ({r.paused_why})" if r.paused_why else ""
        line = f"{r.id}  {r.state}{why}  {r.owner}  {r.key}  {words}  {outcome}"
        print(printable(line))  # ids and text people and Slack chose
    return 0


async def run_now(store: Store, schedule_id: str) -> int:
    try:
        await store.update_schedule(schedule_id, run_now_at=time.time())
    except NotFound:
        raise ConfigError(f"No schedule {schedule_id!r}; `schedules list` shows them.") from None
    print(f"Schedule {schedule_id} fires at the next tick of a running bot.")
    return 0
