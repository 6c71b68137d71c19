"""The Redis coordinator's shared memory of events, against a real redis-server."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.coord.redis import RedisCoordinator
from tests.redis_server import redis_url


async def no_messages(message: dict[str, Any]) -> None:
    pass


async def test_an_event_given_to_two_replicas_at_once_is_handled_by_exactly_one() -> None:
    """Each event comes with two ids (its event id and its message's); marked one at a time,
    two replicas could each mark one first, and the event would be handled by neither."""
    async with redis_url() as url:
        a, b = RedisCoordinator(url), RedisCoordinator(url)
        await a.open(no_messages)
        await b.open(no_messages)
        try:
            for i in range(200):
                ids = (f"Ev{i}", f"C1/1767225600.{i:06d}")
                firsts = await asyncio.gather(a.first_time(*ids), b.first_time(*ids))
                assert sorted(firsts) == [False, True], (i, firsts)
            # A redelivery under another event id, of a message already handled, is seen.
            assert not await a.first_time("EvOther", "C1/1767225600.000001")
        finally:
            await a.close()
            await b.close()
