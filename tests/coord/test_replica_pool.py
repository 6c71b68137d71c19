"""The warm pool with two bot replicas on one Redis: one replica fills it, threads started
at once on either replica each take a different sandbox, and no member serves two."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.store.redis_store import RedisStore
from tests.replicas import answers, replicas, script
from tests.slack_harness import CHANNEL

pytestmark = pytest.mark.timeout(180)
WARM = 2


async def test_two_replicas_take_each_warm_sandbox_once(sandbox_root: Path, monkeypatch) -> None:
    async with replicas(script, sandbox_root, monkeypatch, warm_sandboxes=WARM) as r:
        store = RedisStore(r.redis.url)
        await store.open()
        try:
            free = lambda: [p for p in pooled if p.claimed_at is None]  # noqa: E731
            pooled = await store.pool()
            while len(free()) < WARM:
                await asyncio.sleep(0.1)
                pooled = await store.pool()
            members = {p.sandbox_id for p in pooled}
            # four new threads at once, two on each replica
            asked = [ask_on(r, f"note n{i}", i % 2) for i in range(4)]
            threads = await asyncio.gather(*asked)
            for thread in threads:
                await r.h.slack.wait_for(lambda t=thread: len(answers(r, t)) == 1, 60)
            held = [await sandbox_of(store, r, t) for t in threads]
        finally:
            await store.close()
    assert None not in held and len(set(held)) == 4  # no sandbox serves two threads
    assert members <= set(held)  # the oldest members go first: both warm ones were taken


async def ask_on(r, words: str, connection: int) -> str:
    said = await r.h.slack.post_user_message(CHANNEL, words, mention=True, connection=connection)
    return said["ts"]


async def sandbox_of(store: RedisStore, r, thread: str) -> str | None:
    record = await store.get_session(f"{r.h.slack.team_id}:{CHANNEL}:{thread}")
    return record.sandbox_id if record else None
