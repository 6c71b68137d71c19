"""The Redis store's Lua scripts: each check-then-write runs as one script, so replicas racing
on the same session or run see it happen whole (Redis runs one script at a time).

A script refuses with an error reply whose first word the store maps to its own errors:
NOTFOUND (a session or run that is not there), CONFLICT (a run id already taken) or FENCED
(a write for a thread carrying a stale fencing token).
Hash fields hold JSON, so an unset field is the string "null". Sums are done with Lua's
doubles and written with 17 significant digits: they read back as the same Python float.
"""

from __future__ import annotations

from bot.store.redis_keys import Keys

# The start of each fenced script (FENCED, put before it by `source`): its last key is the
# thread's fence (the newest token, a counter), its last argument the token the writer holds
# ('' for none: not checked). Both are taken off, so the rest sees its own KEYS and ARGV.
FENCE = """
local fence, token = table.remove(KEYS), table.remove(ARGV)
if token ~= '' and redis.call('GET', fence) ~= token then
    return redis.error_reply('FENCED thread taken over: token ' .. token .. ' is stale')
end
"""

# KEYS: the session's hash, the target key. ARGV: a command (SET, RPUSH), its value.
# The write happens only if the session exists.
WRITE_FOR_SESSION = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
return redis.call(ARGV[1], KEYS[2], ARGV[2])
"""

# KEYS: the session's hash, its history, its archive of replaced history. ARGV: the history
# (JSON), and the replaced part to archive ('' for none): written together or not at all.
SAVE_HISTORY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[2]) end
return redis.call('SET', KEYS[2], ARGV[1])
"""

# KEYS: the session's hash. ARGV: field, value, ... (may be none: then only the check).
UPDATE_SESSION = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
index_session(KEYS[1])
return 1
"""

# KEYS: the session's hash. ARGV: USD to add to its Continue allowances.
GRANT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
local total = tonumber(redis.call('HGET', KEYS[1], 'granted_usd')) + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'granted_usd', string.format('%.17g', total))
return 1
"""

# KEYS: the session's hash, its set of used Continue grant ids. ARGV: grant id, USD.
# Returns 1 if this call granted it, 0 if the grant id was used before.
GRANT_ONCE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
local total = tonumber(redis.call('HGET', KEYS[1], 'granted_usd')) + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'granted_usd', string.format('%.17g', total))
return 1
"""

# KEYS: the session's hash, its queue, the queue's id counter.
# ARGV: the entry's JSON array without its opening bracket and id: ',"question","U1",1.5]'.
ENQUEUE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
local id = redis.call('INCR', KEYS[3])
redis.call('RPUSH', KEYS[2], '[' .. id .. ARGV[1])
return id
"""

# KEYS: the session's hash, the run's hash, the in-flight set.
# ARGV: run id, started_at, then the run's field, value, ...
START_RUN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
if redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('CONFLICT run id taken') end
redis.call('HSET', KEYS[2], unpack(ARGV, 3))
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
local runs = PREFIX .. 'session_runs:' .. cjson.decode(redis.call('HGET', KEYS[1], 'key'))
redis.call('ZADD', runs, ARGV[2], ARGV[1])
touch(runs)
return 1
"""

# KEYS: the run's hash, the in-flight set. ARGV: run id, outcome (JSON), ended_at (JSON),
# the key prefix, the writer's token ('' for none). The fence is the run's thread's.
# Only an unended run changes: when a stop and a failure race, the first outcome stands.
END_RUN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no run') end
local key = cjson.decode(redis.call('HGET', KEYS[1], 'key'))
if ARGV[5] ~= '' and redis.call('GET', ARGV[4] .. 'fence:' .. key) ~= ARGV[5] then
    return redis.error_reply('FENCED thread taken over: token ' .. ARGV[5] .. ' is stale')
end
if redis.call('HGET', KEYS[1], 'outcome') == 'null' then
    redis.call('HSET', KEYS[1], 'outcome', ARGV[2], 'ended_at', ARGV[3])
    redis.call('ZREM', KEYS[2], ARGV[1])
    redis.call('ZADD', ENDED, ARGV[3], ARGV[1])
end
return 1
"""

# KEYS: the thread's queue (entries in id order). Returns and removes the oldest entry and
# those right after it from the same asker (an entry is [id, question, user, at]).
TAKE_QUEUED = """
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
local taken, asker = {}, entries[1] and cjson.decode(entries[1])[3]
for _, entry in ipairs(entries) do
    if cjson.decode(entry)[3] ~= asker then break end
    taken[#taken + 1] = entry
end
redis.call('LTRIM', KEYS[1], #taken, -1)
return taken
"""

# KEYS: the run's hash. ARGV: its figures (JSON), the key prefix, the writer's token ('' for
# none). The fence is the run's thread's, as in END_RUN.
RECORD_FIGURES = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no run') end
local key = cjson.decode(redis.call('HGET', KEYS[1], 'key'))
if ARGV[3] ~= '' and redis.call('GET', ARGV[2] .. 'fence:' .. key) ~= ARGV[3] then
    return redis.error_reply('FENCED thread taken over: token ' .. ARGV[3] .. ' is stale')
end
return redis.call('HSET', KEYS[1], 'figures', ARGV[1])
"""

# KEYS: the run's hash. ARGV: who (JSON). Returns the run's fields, or nil when there is none.
REQUEST_STOP = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local run = KEYS[1]
if redis.call('HGET', run, 'outcome') == 'null' and redis.call('HGET', run, 'stopped_by') == 'null'
then
    redis.call('HSET', run, 'stopped_by', ARGV[1])
end
return redis.call('HGETALL', run)
"""

# KEYS: the session's hash, the run's hash, the session's turns, the turn id counter, the
# set of all priced turns. ARGV: the key prefix, the turn's JSON array without its opening
# bracket and id, its cost ('' when unknown), its time, its prompt size, the context window
# (both become the session's latest).
# A priced turn is added to the session's cost and indexed by time under the run's session
# and the run's user (the key names follow redis_keys.Keys).
ADD_TURN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
if redis.call('EXISTS', KEYS[2]) == 0 then return redis.error_reply('NOTFOUND no run') end
local id = redis.call('INCR', KEYS[4])
redis.call('RPUSH', KEYS[3], '[' .. id .. ARGV[2])
redis.call('HSET', KEYS[1], 'prompt_tokens', ARGV[5], 'window_tokens', ARGV[6])
if ARGV[3] ~= '' then
    local total = tonumber(redis.call('HGET', KEYS[1], 'cost_usd')) + tonumber(ARGV[3])
    redis.call('HSET', KEYS[1], 'cost_usd', string.format('%.17g', total))
    local member = id .. ':' .. ARGV[3]
    local run_key = cjson.decode(redis.call('HGET', KEYS[2], 'key'))
    local user = cjson.decode(redis.call('HGET', KEYS[2], 'user'))
    redis.call('ZADD', KEYS[5], ARGV[4], member)
    redis.call('ZADD', ARGV[1] .. 'spend:key:' .. run_key, ARGV[4], member)
    redis.call('ZADD', ARGV[1] .. 'spend:user:' .. user, ARGV[4], member)
    touch(ARGV[1] .. 'spend:key:' .. run_key)
    touch(ARGV[1] .. 'spend:user:' .. user)
end
return id
"""

# KEYS: the session's hash, the run's hash, the session's tool calls. ARGV: the call (JSON).
ADD_TOOL_CALL = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no session') end
if redis.call('EXISTS', KEYS[2]) == 0 then return redis.error_reply('NOTFOUND no run') end
return redis.call('RPUSH', KEYS[3], ARGV[1])
"""

# KEYS: the run's hash. ARGV: the key prefix, the feedback (JSON), kept under the run's session.
ADD_FEEDBACK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOTFOUND no run') end
local key = cjson.decode(redis.call('HGET', KEYS[1], 'key'))
local n = redis.call('RPUSH', ARGV[1] .. 'feedback:' .. key, ARGV[2])
touch(ARGV[1] .. 'feedback:' .. key)
return n
"""

# The writes a thread's owner makes for it; END_RUN and RECORD_FIGURES check their run's
# fence themselves.
FENCED = frozenset(
    {
        "WRITE_FOR_SESSION",
        "SAVE_HISTORY",
        "UPDATE_SESSION",
        "GRANT",
        "GRANT_ONCE",
        "ENQUEUE",
        "START_RUN",
        "TAKE_QUEUED",
        "ADD_TURN",
        "ADD_TOOL_CALL",
    }
)


# Around every script (`source`): the store's layout and the TTL as constants, `touch` (a
# TTL on a thread's or run's key, set again on each write) and `index_session` (a session's
# place in the indexes of activity and of sandboxes held, after a write to its hash). The
# script's own KEYS are touched once it has run; the store-wide ones never are.
AROUND = """
local TTL = {ttl}
local PREFIX = {prefix}
local SHARED = {{{shared}}}
local ACTIVITY, SANDBOXED, ENDED = {activity}, {sandboxed}, {ended}
local function touch(name)
    if TTL > 0 and not SHARED[name] then redis.call('EXPIRE', name, TTL) end
end
local function index_session(hash)
    local key = redis.call('HGET', hash, 'key')
    if not key then return end
    key = cjson.decode(key)
    local last = redis.call('HGET', hash, 'last_activity')
    redis.call('ZADD', ACTIVITY, last, key)
    if redis.call('HGET', hash, 'sandbox_id') == 'null' then
        redis.call('ZREM', SANDBOXED, key)
    else
        redis.call('ZADD', SANDBOXED, last, key)
    end
end
local touched = {{unpack(KEYS)}}
local function body()
{body}
end
local result = body()
for _, name in ipairs(touched) do touch(name) end
return result
"""


def source(name: str, keys: Keys | None = None, ttl_s: int = 0) -> str:
    """The named script as sent to Redis, for the layout `keys` and a TTL of `ttl_s` seconds
    on what it writes (0: none)."""
    body: str = globals()[name]
    return around(FENCE + body if name in FENCED else body, keys, ttl_s)


def around(body: str, keys: Keys | None = None, ttl_s: int = 0) -> str:
    """A script's body inside AROUND."""
    keys = keys or Keys()
    shared = ", ".join(f"[{lua(k)}] = true" for k in keys.shared)
    return AROUND.format(
        ttl=int(ttl_s), prefix=lua(keys.prefix), shared=shared, activity=lua(keys.activity),
        sandboxed=lua(keys.sandboxed), ended=lua(keys.ended), body=body,
    )  # fmt: skip


def lua(text: str) -> str:
    """`text` as a Lua string literal (bytes beyond letters, digits, ':' and '_' escaped)."""
    plain = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_"
    return '"' + "".join(chr(b) if b in plain else f"\\{b}" for b in text.encode()) + '"'
