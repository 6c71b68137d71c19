"""The Redis store's key layout: every key under one prefix, so a Redis can be shared.

    {p}schema                 string: the layout's version (SCHEMA_VERSION)
    {p}sessions               set: every session key
    {p}session:{key}          hash: the session's fields, JSON-encoded, plus granted_usd,
                              cost_usd (the sum of its turns' costs), prompt_tokens and
                              window_tokens (the latest turn's) as numbers
    {p}history:{key}          string: the conversation, JSON
    {p}files:{key}            list: its files in the order taken in, JSON each
    {p}run:{run_id}           hash: the run's fields, JSON-encoded ("null" while unset)
    {p}runs:in_flight         sorted set: unended run ids by started_at (ties by id)
    {p}queue:{key}            list: waiting questions, JSON [id, question, user, at]
    {p}ids:queue, ids:turn    counters: never decremented, so ids are never reused
    {p}turns:{key}            list: the model turns recorded with this key, JSON
    {p}spend, spend:key:{key}, spend:user:{user}
                              sorted sets of priced turns by time ("id:cost"), all of them,
                              by the run's session, by the run's user: what `spent` sums
    {p}tool_calls:{key}       list: the audit of tool calls, JSON each
    {p}feedback:{key}         list: feedback on the session's runs, JSON each
    {p}continued:{key}        set: the Continue grant ids used in the session
    {p}fence:{key}            counter: the thread's newest fencing token (Store.fence)
    {p}sessions:activity      sorted set: every session key by last activity (retention)
    {p}sessions:sandbox       sorted set: the keys of sessions whose record names a
                              sandbox, by last activity (what the reaper reads)
    {p}session_runs:{key}     sorted set: the session's run ids by start
    {p}runs:ended             sorted set: ended run ids by end time (retention)
    {p}schedules              sorted set: every schedule id by creation time
    {p}schedule:{id}          hash: the schedule's fields, JSON-encoded
    {p}firings:{id}           hash: its firings by due time (repr of the float), JSON each
    {p}firing_times:{id}      sorted set: the same due times, by time (newest first reads)
    {p}notes:{place}          hash: a channel's notes by id, JSON each (no TTL)
    {p}definitions:{place}    hash: a channel's saved definitions by name, JSON each
    {p}pool                   sorted set: free warm-pool sandbox ids by when they were added
    {p}pool:claimed           sorted set: taken ones by when they were taken
    {p}pool:added             hash: when each member was added
    {p}snapshots              hash: each suspended thread's snapshot id, by its key

A thread's keys and its runs' carry a TTL, set again by every write to them, so what is
abandoned expires by itself; retention (Store.prune) deletes what is done before that.
A schedule's keys carry no TTL: a schedule lasts until it is deleted.
The store-wide keys (SHARED) have none. Redis Cluster is not supported (the scripts touch
keys of several sessions and the global counters).
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 2  # raise it, with a migration in open(), when the layout changes

DEFAULT_PREFIX = "sci:"


@dataclass(frozen=True)
class Keys:
    prefix: str = DEFAULT_PREFIX

    @property
    def schema(self) -> str:
        return f"{self.prefix}schema"

    @property
    def sessions(self) -> str:
        return f"{self.prefix}sessions"

    @property
    def in_flight(self) -> str:
        return f"{self.prefix}runs:in_flight"

    @property
    def queue_ids(self) -> str:
        return f"{self.prefix}ids:queue"

    @property
    def turn_ids(self) -> str:
        return f"{self.prefix}ids:turn"

    @property
    def spend(self) -> str:
        return f"{self.prefix}spend"

    @property
    def activity(self) -> str:
        return f"{self.prefix}sessions:activity"

    @property
    def sandboxed(self) -> str:
        return f"{self.prefix}sessions:sandbox"

    @property
    def ended(self) -> str:
        return f"{self.prefix}runs:ended"

    @property
    def shared(self) -> tuple[str, ...]:
        """The store-wide keys: never given a TTL."""
        return (
            self.schema, self.sessions, self.in_flight, self.queue_ids, self.turn_ids,
            self.spend, self.activity, self.sandboxed, self.ended, self.schedules,
        )  # fmt: skip

    @property
    def schedules(self) -> str:
        return f"{self.prefix}schedules"

    def schedule(self, schedule_id: str) -> str:
        return f"{self.prefix}schedule:{schedule_id}"

    def firings(self, schedule_id: str) -> str:
        return f"{self.prefix}firings:{schedule_id}"

    @property
    def pool(self) -> str:
        return f"{self.prefix}pool"

    @property
    def pool_claimed(self) -> str:
        return f"{self.prefix}pool:claimed"

    @property
    def pool_added(self) -> str:
        return f"{self.prefix}pool:added"

    @property
    def snapshots(self) -> str:
        return f"{self.prefix}snapshots"

    def definitions(self, place: str) -> str:
        return f"{self.prefix}definitions:{place}"

    def notes(self, place: str) -> str:
        return f"{self.prefix}notes:{place}"

    def firing_times(self, schedule_id: str) -> str:
        return f"{self.prefix}firing_times:{schedule_id}"

    def session_runs(self, key: str) -> str:
        return f"{self.prefix}session_runs:{key}"

    def session(self, key: str) -> str:
        return f"{self.prefix}session:{key}"

    def history(self, key: str) -> str:
        return f"{self.prefix}history:{key}"

    def archive(self, key: str) -> str:
        return f"{self.prefix}archive:{key}"

    def files(self, key: str) -> str:
        return f"{self.prefix}files:{key}"

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def queue(self, key: str) -> str:
        return f"{self.prefix}queue:{key}"

    def turns(self, key: str) -> str:
        return f"{self.prefix}turns:{key}"

    def spend_by_key(self, key: str) -> str:
        return f"{self.prefix}spend:key:{key}"

    def spend_by_user(self, user: str) -> str:
        return f"{self.prefix}spend:user:{user}"

    def tool_calls(self, key: str) -> str:
        return f"{self.prefix}tool_calls:{key}"

    def feedback(self, key: str) -> str:
        return f"{self.prefix}feedback:{key}"

    def continued(self, key: str) -> str:
        return f"{self.prefix}continued:{key}"

    def fence(self, key: str) -> str:
        return f"{self.prefix}fence:{key}"
