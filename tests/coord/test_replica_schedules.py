"""A schedule with replicas on Redis: three bot processes tick, the thread's owner is killed
while the firing's run goes, and the firing still posts exactly once (the survivor takes the
run over as it takes over any run)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.store.base import ScheduleRecord
from bot.store.redis_store import RedisStore
from tests.coord.test_replicas import LEASE_S, RETRIED, mention, steps
from tests.replicas import answers, replicas, script
from tests.slack_harness import CHANNEL

pytestmark = pytest.mark.timeout(180)
NOTE = "Scheduled run (Every minute, UTC"


async def test_a_firing_posts_once_when_its_replica_is_killed_mid_run(
    sandbox_root: Path, monkeypatch
) -> None:
    async with replicas(
        script, sandbox_root, monkeypatch, n=3, replica_lease_s=LEASE_S,
        schedule_min_interval_s=60, schedule_tick_s=0.2,
    ) as r:  # fmt: skip
        thread, owner = await mention(r, "note first")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 30)
        store = RedisStore(r.redis.url)
        await store.open()
        try:
            await store.save_schedule(ScheduleRecord(
                id="minutely", key=f"{r.h.slack.team_id}:{CHANNEL}:{thread}", owner="U0HUMAN01",
                cron="* * * * *", zone="UTC", question="slow", created_at=time.time() - 61,
            ))  # fmt: skip
            await r.h.slack.wait_for(lambda: steps(r, thread) >= 2, 30)  # the firing's step
            await store.update_schedule("minutely", state="paused")  # no second firing
            await r.kill(owner)
            await r.h.wait_for_text(thread, RETRIED, timeout=45)
            await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 2, 60)
            firings = await store.firings("minutely")
        finally:
            await store.close()
    said = r.h.texts(thread)
    assert said.count(NOTE) == 1, said
    assert "slept" in answers(r, thread)[1]
    assert len(firings) == 1
