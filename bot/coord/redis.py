"""Coordination over Redis: a lease per thread and per background job (SET NX PX, renewed
by the holder, lapsing when it dies), event ids remembered for an hour (SET NX EX), and an
inbox per replica (pub/sub) for the events it owns that reached another replica."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import socket
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from bot.coord.base import LEASE_S, Inbox
from bot.store.redis_connect import connect
from bot.store.redis_keys import Keys

log = logging.getLogger(__name__)

LEASE_MS = int(LEASE_S * 1000)
RENEW_S = 5.0
SEEN_S = 3600  # Slack redelivers within minutes
# Renew or drop a lease only while it is still ours.
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"  # noqa: E501
TAKE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) end return false"  # noqa: E501
DROP = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
# All of an event's ids marked seen at once, or none: marked one by one, two replicas given
# the same event could each mark one id first, and neither would handle it.
SEE = """
for _, key in ipairs(KEYS) do
  if redis.call('exists', key) == 1 then return 0 end
end
for _, key in ipairs(KEYS) do redis.call('set', key, ARGV[1], 'EX', ARGV[2]) end
return 1
"""


class RedisCoordinator:
    def __init__(self, url: str, prefix: str = "sci:") -> None:
        self.url = url
        self.replica = f"{socket.gethostname()}-{secrets.token_hex(3)}"
        self._prefix = prefix
        self._redis: Redis | None = None
        self._held: set[str] = set()  # lease keys, threads and jobs
        self._tasks: list[asyncio.Task[None]] = []

    async def open(self, inbox: Inbox) -> None:
        self._redis = await connect(self.url, Keys(self._prefix))
        pubsub = self._redis.pubsub()
        await pubsub.subscribe(self._inbox(self.replica))
        self._tasks = [
            asyncio.create_task(self._listen(pubsub, inbox)),
            asyncio.create_task(self._renew_forever()),
        ]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, RedisError):
                await task
        for lease in list(self._held):
            with contextlib.suppress(RedisError):
                await self._r.eval(DROP, 1, lease, self.replica)
        self._held.clear()
        if self._redis is not None:
            await self._redis.aclose()

    async def claim(self, key: str) -> tuple[str, bool]:
        lease = self._lease("thread", key)
        if await self._r.set(lease, self.replica, nx=True, px=LEASE_MS):
            self._held.add(lease)
            return self.replica, True
        holder = await self._r.get(lease)
        if holder is None:  # it lapsed between the two calls
            return await self.claim(key)
        if holder == self.replica:
            self._held.add(lease)
        return str(holder), False

    async def release(self, key: str) -> None:
        lease = self._lease("thread", key)
        self._held.discard(lease)
        await self._r.eval(DROP, 1, lease, self.replica)

    async def take_from(self, key: str, owner: str) -> bool:
        lease = self._lease("thread", key)
        if await self._r.eval(TAKE, 1, lease, owner, self.replica, LEASE_MS):
            self._held.add(lease)
            return True
        return False

    async def owner(self, key: str) -> str | None:
        holder = await self._r.get(self._lease("thread", key))
        return str(holder) if holder else None

    async def send(self, replica: str, message: dict[str, Any]) -> bool:
        return bool(await self._r.publish(self._inbox(replica), json.dumps(message)))

    async def first_time(self, *ids: str) -> bool:
        keys = [f"{self._prefix}seen:{event_id}" for event_id in filter(None, ids)]
        return not keys or bool(await self._r.eval(SEE, len(keys), *keys, self.replica, SEEN_S))

    async def job(self, name: str) -> bool:
        lease = self._lease("job", name)
        if lease in self._held or await self._r.set(lease, self.replica, nx=True, px=LEASE_MS):
            self._held.add(lease)
            return True
        return False

    @property
    def held(self) -> int:
        return sum(1 for lease in self._held if ":thread:" in lease)

    @property
    def _r(self) -> Redis:
        assert self._redis is not None, "open() first"
        return self._redis

    def _lease(self, kind: str, name: str) -> str:
        return f"{self._prefix}lease:{kind}:{name}"

    def _inbox(self, replica: str) -> str:
        return f"{self._prefix}inbox:{replica}"

    async def _listen(self, pubsub: Any, inbox: Inbox) -> None:
        async for message in pubsub.listen():
            if message.get("type") != "message":
                continue
            try:
                await inbox(json.loads(message["data"]))
            except Exception:
                log.exception("a message from another replica failed")

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(RENEW_S)
            for lease in list(self._held):
                try:
                    if not await self._r.eval(RENEW, 1, lease, self.replica, LEASE_MS):
                        self._held.discard(lease)  # lapsed (Redis was away): not ours now
                        log.warning("lost the lease %s", lease)
                except RedisError as exc:
                    log.warning("could not renew the lease %s: %s", lease, exc)
