"""The Redis store's upkeep: the indexes the reaper and retention read, retention itself
(scripts that delete a batch of what is done, each session or run checked again inside, so
replicas pruning at once are harmless), and the layout's migration to those indexes."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from bot.store.base import Pruned, SessionRecord
from bot.store.redis_keys import Keys

BATCH = 100  # sessions or runs per script: Redis runs nothing else meanwhile

# Shared by both scripts (after AROUND's helpers). DRY: only count.
_HELPERS = """
local DRY = ARGV[#ARGV] == '1'
local function tool_call_run(entry) return cjson.decode(entry).run_id end
local function feedback_run(entry) return cjson.decode(entry)[1] end
local function turn_run(entry) return cjson.decode(entry)[2] end
local function in_parts(list, fn)
    for i = 1, #list, 1000 do fn({unpack(list, i, math.min(i + 999, #list))}) end
end
-- The list's entries of the doomed runs, taken out of it (unless DRY).
local function take_entries(name, doomed, run_of)
    local kept, gone = {}, {}
    for _, entry in ipairs(redis.call('LRANGE', name, 0, -1)) do
        table.insert(doomed[run_of(entry)] and gone or kept, entry)
    end
    if #gone > 0 and not DRY then
        redis.call('DEL', name)
        in_parts(kept, function(part) redis.call('RPUSH', name, unpack(part)) end)
        touch(name)
    end
    return gone
end
-- Delete the doomed runs of a session (a set of ids) with their turns, tool calls, feedback
-- and spend entries; returns how many tool calls and feedback entries they had.
local function drop_runs(key, doomed)
    local calls = take_entries(PREFIX .. 'tool_calls:' .. key, doomed, tool_call_run)
    local ratings = take_entries(PREFIX .. 'feedback:' .. key, doomed, feedback_run)
    local turns = take_entries(PREFIX .. 'turns:' .. key, doomed, turn_run)
    if DRY then return #calls, #ratings end
    local ids, users, members = {}, {}, {}
    for _, entry in ipairs(turns) do ids[string.match(entry, '^%[(%d+),')] = true end
    local by_key = PREFIX .. 'spend:key:' .. key
    for _, member in ipairs(redis.call('ZRANGE', by_key, 0, -1)) do
        if ids[string.match(member, '^(%d+):')] then table.insert(members, member) end
    end
    for run_id in pairs(doomed) do
        local run = PREFIX .. 'run:' .. run_id
        local user = redis.call('HGET', run, 'user')
        if user then users[cjson.decode(user)] = true end
        redis.call('DEL', run)
        redis.call('ZREM', ENDED, run_id)
        redis.call('ZREM', PREFIX .. 'session_runs:' .. key, run_id)
    end
    in_parts(members, function(part)
        redis.call('ZREM', PREFIX .. 'spend', unpack(part))
        redis.call('ZREM', by_key, unpack(part))
        for user in pairs(users) do
            redis.call('ZREM', PREFIX .. 'spend:user:' .. user, unpack(part))
        end
    end)
    return #calls, #ratings
end
"""

# ARGV: ended before, offset, limit, dry ('1': count only).
# Returns {0, runs, tool calls, feedback, run ids looked at}.
PRUNE_RUNS = (
    _HELPERS
    + """
local ids = redis.call('ZRANGEBYSCORE', ENDED, '-inf', '(' .. ARGV[1], 'LIMIT', ARGV[2], ARGV[3])
local by_key, runs, calls, ratings = {}, 0, 0, 0
for _, run_id in ipairs(ids) do
    local key = redis.call('HGET', PREFIX .. 'run:' .. run_id, 'key')
    if key then
        key = cjson.decode(key)
        by_key[key] = by_key[key] or {}
        by_key[key][run_id] = true
        runs = runs + 1
    elseif not DRY then
        redis.call('ZREM', ENDED, run_id)  -- expired already
    end
end
for key, doomed in pairs(by_key) do
    local c, r = drop_runs(key, doomed)
    calls, ratings = calls + c, ratings + r
end
if not DRY then  -- what sessions that expired by themselves left in the spend of all turns
    redis.call('ZREMRANGEBYSCORE', PREFIX .. 'spend', '-inf', '(' .. ARGV[1])
end
return {0, runs, calls, ratings, #ids}
"""
)

# ARGV: quiet before, runs ended before ('': none), offset, limit, dry ('1': count only).
# A session is done when quiet since before the cutoff, naming no sandbox, with no run in
# flight; one whose hash expired already leaves only index entries and leftovers, cleared.
# Returns {sessions, runs, tool calls, feedback, sessions kept, sessions looked at}; a dry
# run does not count the runs the runs' step counts (ended before that cutoff).
PRUNE_SESSIONS = (
    _HELPERS
    + """
local before, runs_before = tonumber(ARGV[1]), tonumber(ARGV[2])
local keys =
    redis.call('ZRANGEBYSCORE', ACTIVITY, '-inf', '(' .. ARGV[1], 'LIMIT', ARGV[3], ARGV[4])
local totals, kept = {0, 0, 0, 0}, 0
for _, key in ipairs(keys) do
    local fields = redis.call('HMGET', PREFIX .. 'session:' .. key, 'last_activity', 'sandbox_id')
    local done = not fields[1] or (tonumber(fields[1]) < before and fields[2] == 'null')
    local run_ids = redis.call('ZRANGE', PREFIX .. 'session_runs:' .. key, 0, -1)
    for _, run_id in ipairs(run_ids) do
        if redis.call('ZSCORE', PREFIX .. 'runs:in_flight', run_id) then done = false end
    end
    if not done then
        kept = kept + 1
    else
        local doomed = {}
        for _, run_id in ipairs(run_ids) do
            local ended = tonumber(redis.call('ZSCORE', ENDED, run_id))
            local counted = DRY and runs_before and ended and ended < runs_before
            if redis.call('EXISTS', PREFIX .. 'run:' .. run_id) == 1 and not counted then
                doomed[run_id] = true
                totals[2] = totals[2] + 1
            end
        end
        local c, r = drop_runs(key, doomed)
        totals[1] = totals[1] + (fields[1] and 1 or 0)
        totals[3], totals[4] = totals[3] + c, totals[4] + r
        if not DRY then
            for _, kind in ipairs({'session:', 'history:', 'archive:', 'files:', 'queue:',
                    'turns:', 'tool_calls:', 'feedback:', 'continued:', 'fence:', 'spend:key:',
                    'session_runs:'}) do
                redis.call('DEL', PREFIX .. kind .. key)
            end
            for _, run_id in ipairs(run_ids) do
                redis.call('DEL', PREFIX .. 'run:' .. run_id)
                redis.call('ZREM', ENDED, run_id)
            end
            redis.call('SREM', PREFIX .. 'sessions', key)
            redis.call('ZREM', ACTIVITY, key)
            redis.call('ZREM', SANDBOXED, key)
        end
    end
end
return {totals[1], totals[2], totals[3], totals[4], kept, #keys}
"""
)

SCRIPTS = {"PRUNE_RUNS": PRUNE_RUNS, "PRUNE_SESSIONS": PRUNE_SESSIONS}


def index_saved(tx: Any, keys: Keys, record: SessionRecord) -> None:
    """A saved session's place in the indexes, in the same transaction (`tx`) as its save."""
    tx.zadd(keys.activity, {record.key: record.last_activity})
    if record.sandbox_id:
        tx.zadd(keys.sandboxed, {record.key: record.last_activity})
    else:
        tx.zrem(keys.sandboxed, record.key)


async def prune(
    scripts: dict[str, AsyncScript],
    sessions_before: float | None,
    runs_before: float | None,
    dry_run: bool,
) -> Pruned:
    """Runs first, then sessions, a batch per script call until none is left."""
    dry = "1" if dry_run else ""
    total = Pruned()
    if runs_before is not None:
        offset = 0
        while True:
            args: list[str | int] = [repr(float(runs_before)), offset, BATCH, dry]
            *counts, seen = await scripts["PRUNE_RUNS"](keys=[], args=args)
            total += Pruned(*counts)
            offset += seen if dry_run else 0  # deleted ones leave the index
            if seen < BATCH:
                break
    if sessions_before is not None:
        offset, ended = 0, "" if runs_before is None else repr(float(runs_before))
        while True:
            args = [repr(float(sessions_before)), ended, offset, BATCH, dry]
            *counts, kept, seen = await scripts["PRUNE_SESSIONS"](keys=[], args=args)
            total += Pruned(*counts)
            offset += seen if dry_run else kept  # the kept ones stay ahead in the index
            if seen < BATCH:
                break
    return total


async def migrate(client: Redis, keys: Keys) -> None:
    """Layout 1 to 2: the indexes of sessions (by activity, holding a sandbox) and of runs
    (by session, by end), built from what is stored. Idempotent: replicas starting at once
    may both run it."""
    async for key in client.sscan_iter(keys.sessions, count=1000):
        fields = await client.hmget(keys.session(key), ["last_activity", "sandbox_id"])
        if fields[0] is None:
            continue
        await client.zadd(keys.activity, {key: float(fields[0])})
        if fields[1] not in (None, "null"):
            await client.zadd(keys.sandboxed, {key: float(fields[0])})
    async for name in client.scan_iter(match=f"{keys.prefix}run:*", count=1000):
        key, started, ended = await client.hmget(name, ["key", "started_at", "ended_at"])
        if key is None:
            continue
        run_id = name.removeprefix(f"{keys.prefix}run:")
        await client.zadd(keys.session_runs(json.loads(key)), {run_id: float(started or 0)})
        if ended not in (None, "null"):
            await client.zadd(keys.ended, {run_id: float(ended)})
