"""The Redis store: the same Store as SQLite's, on a Redis server that several replicas share.

Every write that checks before it writes (the session exists, the run is unended, the
writer's fencing token is the thread's newest) is one Lua script, so racing replicas never
see or make half a change. The key layout is in redis_keys.py, the encoding in redis_codec.py.
Opening (and why commands are not retried) is in redis_connect.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Any, cast

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError, ResponseError

import bot.store.redis_codec as codec
import bot.store.redis_prune as upkeep
import bot.store.redis_scripts as lua
from bot.store.base import (
    RUN_OUTCOMES,
    SCHEDULE_STATES,
    SESSION_STATES,
    DefinitionRecord,
    FeedbackRecord,
    Fenced,
    FileRecord,
    FiringRecord,
    NoteRecord,
    NotFound,
    PoolRecord,
    Pruned,
    Queued,
    RunOutcome,
    RunRecord,
    ScheduleRecord,
    SessionRecord,
    StoreError,
    ToolCallRecord,
)
from bot.store.redis_connect import connect
from bot.store.redis_keys import DEFAULT_PREFIX, Keys
from bot.store.redis_schedules import RedisSchedules
from bot.store.values import check, check_schedule_update, check_update, prompt_tokens, text


class RedisStore:
    """The Store on Redis (`redis://`, `rediss://` or `unix://` URL), keys under `prefix`."""

    def __init__(self, url: str, prefix: str = DEFAULT_PREFIX, ttl_s: int = 0) -> None:
        """`ttl_s`: how long a thread's keys outlive its last write (0: forever)."""
        self.url = url
        self.keys = Keys(prefix)
        self.ttl_s = int(ttl_s)
        self._redis: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._schedule_calls: RedisSchedules | None = None

    async def open(self) -> None:
        if self._redis is not None:
            raise StoreError("the store is already open")
        client = await connect(self.url, self.keys)
        self._scripts = {
            name: client.register_script(lua.source(name, self.keys, self.ttl_s))
            for name in _SCRIPTS
        }
        for name, body in upkeep.SCRIPTS.items():
            self._scripts[name] = client.register_script(lua.around(body, self.keys, self.ttl_s))
        self._redis = client
        self._schedule_calls = RedisSchedules(client, self.keys)

    async def close(self) -> None:
        client, self._redis = self._redis, None
        if client is not None:
            await client.aclose()

    async def ping(self) -> None:
        with self._errors():
            await self._db.ping()

    async def fence(self, key: str) -> int:
        with self._errors():
            async with self._db.pipeline(transaction=True) as tx:
                tx.incr(self.keys.fence(key))
                self._expire(tx, self.keys.fence(key))
                return int((await tx.execute())[0])

    async def save_session(self, record: SessionRecord) -> None:
        check(record.state, SESSION_STATES)
        session = self.keys.session(record.key)
        with self._errors():
            async with self._db.pipeline(transaction=True) as tx:
                tx.hset(session, mapping=_wire(codec.session_fields(record)))
                tx.hsetnx(session, "granted_usd", "0")  # the store's own: kept on a save
                tx.hsetnx(session, "cost_usd", "0")
                tx.hsetnx(session, "prompt_tokens", "0")
                tx.hsetnx(session, "window_tokens", "0")
                tx.sadd(self.keys.sessions, record.key)
                upkeep.index_saved(tx, self.keys, record)
                self._expire(tx, session)
                await tx.execute()

    async def get_session(self, key: str) -> SessionRecord | None:
        with self._errors():
            return codec.session_from(_text(await self._db.hgetall(self.keys.session(key))))

    async def list_sessions(self) -> list[SessionRecord]:
        with self._errors():
            keys = _texts(await self._db.smembers(self.keys.sessions))
            found = await self._hashes([self.keys.session(key) for key in keys])
        records = [r for fields in found if (r := codec.session_from(fields))]
        return sorted(records, key=lambda r: (-r.last_activity, r.key))

    async def update_session(self, key: str, *, token: int | None = None, **fields: Any) -> None:
        check_update(fields)
        args = codec.flat(codec.hash_fields(fields))
        await self._fenced(key, token, "UPDATE_SESSION", [self.keys.session(key)], args)

    async def save_history(
        self,
        key: str,
        messages: list[dict[str, Any]],
        *,
        token: int | None = None,
        archive: dict[str, Any] | None = None,
    ) -> None:
        data = await asyncio.to_thread(json.dumps, messages)  # may be megabytes
        old = await asyncio.to_thread(json.dumps, archive) if archive else ""
        keys = [self.keys.session(key), self.keys.history(key), self.keys.archive(key)]
        await self._fenced(key, token, "SAVE_HISTORY", keys, [data, old])

    async def archived_history(self, key: str) -> list[dict[str, Any]]:
        entries = await self._list(self.keys.archive(key))
        return [await asyncio.to_thread(json.loads, entry) for entry in entries]

    async def load_history(self, key: str) -> list[dict[str, Any]]:
        with self._errors():
            data = await self._db.get(self.keys.history(key))
        return await asyncio.to_thread(json.loads, data) if data else []

    async def add_file(self, key: str, file: FileRecord, *, token: int | None = None) -> None:
        keys = [self.keys.session(key), self.keys.files(key)]
        args = ["RPUSH", codec.file_entry(file)]
        await self._fenced(key, token, "WRITE_FOR_SESSION", keys, args)

    async def files(self, key: str) -> list[FileRecord]:
        return [codec.file_from(entry) for entry in await self._list(self.keys.files(key))]

    async def start_run(
        self,
        key: str,
        run_id: str,
        question: str,
        at: float,
        user: str = "",
        *,
        token: int | None = None,
    ) -> None:
        keys = [self.keys.session(key), self.keys.run(run_id), self.keys.in_flight]
        fields = codec.run_fields(key, run_id, question, at, user)
        await self._fenced(key, token, "START_RUN", keys, [run_id, at, *codec.flat(fields)])

    async def end_run(
        self, run_id: str, outcome: RunOutcome, at: float, *, token: int | None = None
    ) -> None:
        check(outcome, RUN_OUTCOMES)
        keys = [self.keys.run(run_id), self.keys.in_flight]
        args = [run_id, codec.dumps(outcome), codec.dumps(at), self.keys.prefix, _token(token)]
        await self._script("END_RUN", keys, args)

    async def get_run(self, run_id: str) -> RunRecord | None:
        with self._errors():
            return codec.run_from(_text(await self._db.hgetall(self.keys.run(run_id))))

    async def runs(self, key: str) -> list[RunRecord]:
        # The session's turns name its runs (each entry is [id, run_id, ...]).
        turns = await self._list(self.keys.turns(key))
        run_ids = list(dict.fromkeys(json.loads(entry)[1] for entry in turns))
        with self._errors():
            found = await self._hashes([self.keys.run(run_id) for run_id in run_ids])
        records = [r for fields in found if (r := codec.run_from(fields))]
        return sorted(records, key=lambda r: (r.started_at, r.run_id))

    async def record_figures(
        self, run_id: str, figures: list[dict[str, Any]], *, token: int | None = None
    ) -> None:
        args = [codec.dumps(figures), self.keys.prefix, _token(token)]
        await self._script("RECORD_FIGURES", [self.keys.run(run_id)], args)

    async def request_stop(self, run_id: str, by: str) -> RunRecord | None:
        fields = await self._script("REQUEST_STOP", [self.keys.run(run_id)], [codec.dumps(by)])
        run = codec.run_from(fields)
        return run if run and run.outcome is None else None

    async def grant(self, key: str, usd: float, *, token: int | None = None) -> None:
        await self._fenced(key, token, "GRANT", [self.keys.session(key)], [float(usd)])

    async def grant_once(
        self, key: str, grant_id: str, usd: float, *, token: int | None = None
    ) -> bool:
        keys = [self.keys.session(key), self.keys.continued(key)]
        return bool(await self._fenced(key, token, "GRANT_ONCE", keys, [grant_id, float(usd)]))

    async def enqueue(
        self, key: str, question: str, user: str, at: float, *, token: int | None = None
    ) -> int:
        keys = [self.keys.session(key), self.keys.queue(key), self.keys.queue_ids]
        entry = codec.tail([text(question), user, at])
        return int(await self._fenced(key, token, "ENQUEUE", keys, [entry]))

    async def take_queued(self, key: str, *, token: int | None = None) -> list[Queued]:
        entries = await self._fenced(key, token, "TAKE_QUEUED", [self.keys.queue(key)], [])
        return sorted((codec.queued_from(e) for e in entries), key=lambda q: q.id)

    async def runs_in_flight(self) -> list[RunRecord]:
        with self._errors():
            run_ids = _texts(await self._db.zrange(self.keys.in_flight, 0, -1))
            found = await self._hashes([self.keys.run(run_id) for run_id in run_ids])
        # A run that ended between the two reads is left out.
        return [r for fields in found if (r := codec.run_from(fields)) and r.outcome is None]

    async def add_turn(
        self,
        key: str,
        run_id: str,
        usage: dict[str, int],
        cost_usd: float | None,
        at: float,
        *,
        token: int | None = None,
        window_tokens: int | None = None,
    ) -> None:
        k = self.keys
        keys = [k.session(key), k.run(run_id), k.turns(key), k.turn_ids, k.spend]
        entry = codec.tail([run_id, usage, cost_usd, at])
        cost = "" if cost_usd is None else repr(float(cost_usd))
        prompt = [prompt_tokens(usage), window_tokens or 0]
        await self._fenced(key, token, "ADD_TURN", keys, [k.prefix, entry, cost, at, *prompt])

    async def add_tool_call(
        self, key: str, call: ToolCallRecord, *, token: int | None = None
    ) -> None:
        keys = [self.keys.session(key), self.keys.run(call.run_id), self.keys.tool_calls(key)]
        await self._fenced(key, token, "ADD_TOOL_CALL", keys, [codec.tool_call_entry(call)])

    async def tool_calls(self, key: str) -> list[ToolCallRecord]:
        entries = await self._list(self.keys.tool_calls(key))
        return [codec.tool_call_from(entry) for entry in entries]

    async def add_feedback(self, run_id: str, user: str, value: str, at: float) -> None:
        entry = codec.feedback_entry(run_id, user, value, at)
        await self._script("ADD_FEEDBACK", [self.keys.run(run_id)], [self.keys.prefix, entry])

    async def feedback(self, key: str) -> list[FeedbackRecord]:
        return [codec.feedback_from(entry) for entry in await self._list(self.keys.feedback(key))]

    async def spent(
        self, *, key: str | None = None, user: str | None = None, since: float = 0.0
    ) -> float:
        indexes = [self.keys.spend_by_key(key)] if key is not None else []
        indexes += [self.keys.spend_by_user(user)] if user is not None else []
        with self._errors():
            ranges = [
                set(_texts(await self._db.zrangebyscore(index, since, "+inf")))
                for index in indexes or [self.keys.spend]
            ]
        # Both filters: the turns in both indexes. Summed in the order they were recorded.
        turns = sorted(map(codec.spend_cost, set.intersection(*ranges)))
        return float(sum(cost for _, cost in turns))

    # Upkeep (redis_prune.py).

    async def sessions_holding_sandboxes(
        self, quiet_since: float | None = None
    ) -> list[SessionRecord]:
        upto = "+inf" if quiet_since is None else quiet_since
        with self._errors():
            keys = _texts(await self._db.zrevrangebyscore(self.keys.sandboxed, upto, "-inf"))
            found = await self._hashes([self.keys.session(key) for key in keys])
        records = [r for fields in found if (r := codec.session_from(fields)) and r.sandbox_id]
        return sorted(records, key=lambda r: (-r.last_activity, r.key))

    async def prune(
        self,
        sessions_before: float | None,
        runs_before: float | None,
        *,
        dry_run: bool = False,
    ) -> Pruned:
        with self._errors():
            return await upkeep.prune(self._scripts, sessions_before, runs_before, dry_run)

    async def vacuum(self) -> None:
        pass  # Redis gives back the memory of deleted keys itself

    # Schedules.

    async def save_schedule(self, record: ScheduleRecord) -> None:
        check(record.state, SCHEDULE_STATES)
        with self._errors():
            await self._schedules.save(record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        with self._errors():
            return await self._schedules.get(schedule_id)

    async def list_schedules(self) -> list[ScheduleRecord]:
        with self._errors():
            return await self._schedules.all()

    async def update_schedule(self, schedule_id: str, **fields: Any) -> None:
        check_schedule_update(fields)
        with self._errors():
            await self._schedules.update(schedule_id, fields)

    async def delete_schedule(self, schedule_id: str) -> None:
        with self._errors():
            await self._schedules.delete(schedule_id)

    async def claim_firing(self, schedule_id: str, fire_at: float, by: str, at: float) -> bool:
        with self._errors():
            return await self._schedules.claim(schedule_id, fire_at, by, at)

    async def end_firing(
        self,
        schedule_id: str,
        fire_at: float,
        outcome: str,
        run_id: str = "",
        cost_usd: float = 0.0,
    ) -> int:
        with self._errors():
            return await self._schedules.end(schedule_id, fire_at, outcome, run_id, cost_usd)

    async def firings(self, schedule_id: str, limit: int = 20) -> list[FiringRecord]:
        with self._errors():
            return await self._schedules.firings(schedule_id, limit)

    # The warm pool: a claim moves the oldest free id to the taken set in one script.

    async def pool_add(self, sandbox_id: str, at: float) -> None:
        with self._errors():
            async with self._db.pipeline(transaction=True) as tx:
                tx.zadd(self.keys.pool, {sandbox_id: at}, nx=True)
                tx.hsetnx(self.keys.pool_added, sandbox_id, repr(at))
                await tx.execute()

    async def pool_claim(self, at: float) -> str | None:
        keys = [self.keys.pool, self.keys.pool_claimed]
        with self._errors():
            taken = await self._db.eval(POOL_CLAIM, 2, *keys, repr(at))
        return None if taken is None else str(taken)

    async def pool(self) -> list[PoolRecord]:
        with self._errors():
            free = await self._db.zrange(self.keys.pool, 0, -1, withscores=True)
            taken = await self._db.zrange(self.keys.pool_claimed, 0, -1, withscores=True)
            added = _text(await self._db.hgetall(self.keys.pool_added))
        records = [PoolRecord(str(i), float(at)) for i, at in cast(list[Scored], free)]
        records += [
            PoolRecord(str(i), float(added.get(str(i), at)), float(at))
            for i, at in cast(list[Scored], taken)
        ]
        return sorted(records, key=lambda r: (r.added_at, r.sandbox_id))

    async def pool_forget(self, sandbox_id: str) -> None:
        with self._errors():
            async with self._db.pipeline(transaction=True) as tx:
                tx.zrem(self.keys.pool, sandbox_id)
                tx.zrem(self.keys.pool_claimed, sandbox_id)
                tx.hdel(self.keys.pool_added, sandbox_id)
                await tx.execute()

    async def set_snapshot(self, key: str, snapshot_id: str | None) -> None:
        with self._errors():
            if snapshot_id is None:
                await self._db.hdel(self.keys.snapshots, key)
            else:
                await self._db.hset(self.keys.snapshots, key, snapshot_id)

    async def snapshot_of(self, key: str) -> str | None:
        with self._errors():
            found = await self._db.hget(self.keys.snapshots, key)
        return None if found is None else str(found)

    async def snapshots(self) -> dict[str, str]:
        with self._errors():
            return _text(await self._db.hgetall(self.keys.snapshots))

    # Channel memory: a hash per place, a note per field.

    async def add_note(self, note: NoteRecord) -> None:
        values = {**asdict(note), "text": text(note.text)}
        with self._errors():
            await self._db.hset(self.keys.notes(note.place), note.id, json.dumps(values))

    async def notes(self, place: str) -> list[NoteRecord]:
        with self._errors():
            found = await self._db.hvals(self.keys.notes(place))
        records = [NoteRecord(**json.loads(raw)) for raw in found]
        return sorted(records, key=lambda n: (n.saved_at, n.id))

    async def delete_note(self, place: str, note_id: str) -> bool:
        with self._errors():
            return bool(await self._db.hdel(self.keys.notes(place), note_id))

    async def save_definition(self, definition: DefinitionRecord) -> None:
        values = {**asdict(definition), "code": text(definition.code)}
        key = self.keys.definitions(definition.place)
        with self._errors():
            await self._db.hset(key, definition.name, json.dumps(values))

    async def definitions(self, place: str) -> list[DefinitionRecord]:
        with self._errors():
            found = await self._db.hvals(self.keys.definitions(place))
        records = []
        for raw in found:
            values = json.loads(raw)
            records.append(DefinitionRecord(**{**values, "figures": tuple(values["figures"])}))
        return sorted(records, key=lambda d: d.name)

    async def delete_definition(self, place: str, name: str) -> bool:
        with self._errors():
            return bool(await self._db.hdel(self.keys.definitions(place), name))

    @property
    def _schedules(self) -> RedisSchedules:
        if self._schedule_calls is None:
            raise StoreError("the store is not open")
        return self._schedule_calls

    # Plumbing.

    def _expire(self, tx: Any, name: str) -> None:
        if self.ttl_s:
            tx.expire(name, self.ttl_s)

    @property
    def _db(self) -> Redis:
        if self._redis is None:
            raise StoreError("the store is not open")
        return self._redis

    async def _script(self, name: str, keys: list[str], args: list[Any]) -> Any:
        with self._errors():
            if self._redis is None:
                raise StoreError("the store is not open")
            return await self._scripts[name](keys=keys, args=args)

    async def _fenced(
        self, key: str, token: int | None, name: str, keys: list[str], args: list[Any]
    ) -> Any:
        """A script that writes for the thread `key`, refused in it if `token` is stale."""
        return await self._script(name, [*keys, self.keys.fence(key)], [*args, _token(token)])

    async def _hashes(self, names: list[str]) -> list[dict[str, str]]:
        async with self._db.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(name)
            return await pipe.execute()

    async def _list(self, name: str) -> list[str]:
        with self._errors():
            return _texts(await self._db.lrange(name, 0, -1))

    @staticmethod
    @contextlib.contextmanager
    def _errors() -> Iterator[None]:
        """Redis errors as the store's own; a script's refusal names what was missing."""
        try:
            yield
        except ResponseError as exc:
            kind, _, detail = str(exc).partition(" ")
            if kind == "NOTFOUND":
                raise NotFound(f"{detail}: the write refers to one not in the store") from None
            if kind == "FENCED":
                raise Fenced(detail) from None
            raise StoreError(detail if kind == "CONFLICT" else f"Redis: {exc}") from exc
        except RedisError as exc:
            raise StoreError(f"Redis: {exc}") from exc


def _token(token: int | None) -> str:
    return "" if token is None else str(int(token))


# KEYS: free pool, taken pool; ARGV: when. The oldest free id, moved to the taken set.
POOL_CLAIM = """
local got = redis.call('ZPOPMIN', KEYS[1])
if #got == 0 then return false end
redis.call('ZADD', KEYS[2], ARGV[1], got[1])
return got[1]
"""

_SCRIPTS = (
    "WRITE_FOR_SESSION", "SAVE_HISTORY", "UPDATE_SESSION", "GRANT", "GRANT_ONCE", "ENQUEUE",
    "START_RUN", "END_RUN", "REQUEST_STOP", "ADD_TURN", "ADD_TOOL_CALL", "ADD_FEEDBACK",
    "TAKE_QUEUED", "RECORD_FIGURES",
)  # fmt: skip


Scored = tuple[str, float]  # a sorted set's member with its score


def _text(fields: dict[Any, Any]) -> dict[str, str]:
    """A reply as the client gives it: its connection decodes every reply to str
    (decode_responses=True), which redis-py's type hints do not follow."""
    return cast(dict[str, str], fields)


def _texts(values: Iterable[Any]) -> list[str]:
    """Members or items of a reply, decoded as `_text` says."""
    return cast(list[str], list(values))


def _wire(fields: dict[str, str]) -> dict[Any, Any]:
    """Fields for a hash write (redis-py's hint wants its own key and value types)."""
    return fields
