"""`python -m bot schedules list`: the stored schedules, for operators: state, owner, the
schedule in words with its next firing, and the last firing's outcome."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bot.schedules.cadence import Cadence
from bot.store.base import Store
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
