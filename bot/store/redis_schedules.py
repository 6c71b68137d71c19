"""The Redis store's schedules (layout in redis_keys.py). A firing is claimed by a script
that sets its (schedule, due time) field only if it is not there (HSETNX): one caller wins,
however many replicas race, and the claim is as durable as Redis's append-only file.
Schedules carry no TTL: one lasts until it is deleted."""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from bot.store.base import FiringRecord, NotFound, ScheduleRecord
from bot.store.redis_keys import Keys
from bot.store.values import text

CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
local last = redis.call('HGET', KEYS[1], 'last_fire_at')
if (not last) or last == 'null' or tonumber(last) < tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], 'last_fire_at', ARGV[3])
end
return 1
"""
END = """
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local raw = redis.call('HGET', KEYS[2], ARGV[1])
if raw then
  local firing = cjson.decode(raw)
  if firing['outcome'] == '' then
    firing['outcome'] = ARGV[2]
    firing['run_id'] = ARGV[3]
    firing['cost_usd'] = tonumber(ARGV[4])
    redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(firing))
    if ARGV[2] == 'failed' then
      redis.call('HINCRBY', KEYS[1], 'failures', 1)
    else
      redis.call('HSET', KEYS[1], 'failures', 0)
    end
  end
end
return tonumber(redis.call('HGET', KEYS[1], 'failures'))
"""
UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
"""
SCHEDULE_FIELDS = [f.name for f in fields(ScheduleRecord)]


class RedisSchedules:
    def __init__(self, client: Redis, keys: Keys) -> None:
        self._db, self._keys = client, keys
        self._claim: AsyncScript = client.register_script(CLAIM)
        self._end: AsyncScript = client.register_script(END)
        self._update: AsyncScript = client.register_script(UPDATE)

    async def save(self, record: ScheduleRecord) -> None:
        values = {**asdict(record), "question": text(record.question)}
        async with self._db.pipeline(transaction=True) as tx:
            tx.hset(self._keys.schedule(record.id), mapping=_encoded(values))
            tx.zadd(self._keys.schedules, {record.id: record.created_at})
            await tx.execute()

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        return _schedule(await self._db.hgetall(self._keys.schedule(schedule_id)))

    async def all(self) -> list[ScheduleRecord]:
        ids = [_str(i) for i in await self._db.zrange(self._keys.schedules, 0, -1)]
        async with self._db.pipeline(transaction=False) as pipe:
            for schedule_id in ids:
                pipe.hgetall(self._keys.schedule(schedule_id))
            found = await pipe.execute()
        return [record for values in found if (record := _schedule(values))]

    async def update(self, schedule_id: str, changes: dict[str, Any]) -> None:
        if "question" in changes:
            changes = {**changes, "question": text(changes["question"])}
        pairs = [item for pair in _encoded(changes).items() for item in pair]
        if not pairs:
            pairs = ["id", json.dumps(schedule_id)]
        if not await self._update(keys=[self._keys.schedule(schedule_id)], args=pairs):
            raise NotFound(f"no schedule {schedule_id!r}")

    async def delete(self, schedule_id: str) -> None:
        keys = self._keys
        async with self._db.pipeline(transaction=True) as tx:
            tx.delete(
                keys.schedule(schedule_id),
                keys.firings(schedule_id),
                keys.firing_times(schedule_id),
            )
            tx.zrem(keys.schedules, schedule_id)
            await tx.execute()

    async def claim(self, schedule_id: str, fire_at: float, by: str, at: float) -> bool:
        firing = json.dumps({"claimed_by": by, "claimed_at": at, "outcome": "", "run_id": ""})
        keys = [
            self._keys.schedule(schedule_id),
            self._keys.firings(schedule_id),
            self._keys.firing_times(schedule_id),
        ]
        return bool(await self._claim(keys=keys, args=[repr(fire_at), firing, repr(fire_at)]))

    async def end(
        self, schedule_id: str, fire_at: float, outcome: str, run_id: str, cost_usd: float
    ) -> int:
        keys = [self._keys.schedule(schedule_id), self._keys.firings(schedule_id)]
        args = [repr(fire_at), outcome, run_id, repr(float(cost_usd))]
        failures = int(await self._end(keys=keys, args=args))
        if failures < 0:
            raise NotFound(f"no schedule {schedule_id!r}")
        return failures

    async def firings(self, schedule_id: str, limit: int) -> list[FiringRecord]:
        times = [
            _str(t)
            for t in await self._db.zrevrange(self._keys.firing_times(schedule_id), 0, limit - 1)
        ]
        if not times:
            return []
        found = await self._db.hmget(self._keys.firings(schedule_id), times)
        records = []
        for fire_at, raw in zip(times, found, strict=True):
            if raw is not None:
                values = json.loads(raw)
                records.append(FiringRecord(schedule_id, float(fire_at), **values))
        return records


def _encoded(values: dict[str, Any]) -> dict[Any, Any]:  # redis-py's hint wants its own types
    return {name: json.dumps(value) for name, value in values.items()}


def _schedule(values: dict[Any, Any]) -> ScheduleRecord | None:
    if not values:
        return None
    decoded = {_str(k): json.loads(v) for k, v in values.items()}
    return ScheduleRecord(**{name: decoded[name] for name in SCHEDULE_FIELDS if name in decoded})


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
