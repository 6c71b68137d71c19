"""Around the runs: reattaching after a start, the idle reaper, and a graceful shutdown.

The reaper works from the store, so a thread is reaped whichever process served it last,
and never while a run is in flight anywhere. A quiet thread's sandbox is deleted, or with
SESSION_IDLE_ACTION=stop stopped and kept (files and all) for SESSION_RETAIN_S, then
deleted; until then it counts as owned, so the orphan sweeper leaves it alone. A reaped
thread leaves this process's memory and is loaded from the store at its next event, so
memory holds only the threads in use.

When a new sandbox would pass MAX_SANDBOXES, the thread held here that has gone longest
without use, and has no run going, is torn down the same way at once (`make_room`), so a
burst of threads is not refused while sandboxes sit idle. With replicas only threads this
process holds (whose lease it has) are candidates, each checked against its fencing token
first; the cap, like the sandboxes, is this process's own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Literal

from bot.errors import BotError
from bot.sandbox.base import SandboxProvider
from bot.sessions.events import RunInterrupted, SandboxSuspended, ViewFor
from bot.sessions.session import Keep
from bot.sessions.snapshots import SnapshotKeeper
from bot.sessions.thread import ThreadState
from bot.sessions.thread_table import ThreadTable
from bot.store.base import Fenced, RunRecord, SessionRecord, Store

log = logging.getLogger(__name__)

IdleAction = Literal["delete", "stop", "snapshot"]
Claim = Callable[[str], Awaitable[bool]]
Release = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class Upkeep:
    """When quiet threads' sandboxes go: deleted after `idle_timeout_s`, or stopped and kept
    `retain_s` more (`idle_action`); a run left in flight is ended after `repair_grace_s`."""

    idle_timeout_s: float
    idle_action: IdleAction = "delete"
    retain_s: float = 86_400
    repair_grace_s: float = 60.0


async def _always(key: str) -> bool:
    return True


async def let_go_nothing(key: str) -> None:
    """One process alone: there is no lease to let go."""


class Lifecycle:
    def __init__(
        self,
        threads: ThreadTable,
        store: Store,
        provider: SandboxProvider,
        view_for: ViewFor,
        *,
        upkeep: Upkeep,
        live_runs: Collection[str] = frozenset(),
        clock: Callable[[], float] = time.time,
        claim: Claim | None = None,
        release: Release | None = None,
        keeper: SnapshotKeeper | None = None,
    ) -> None:
        """`keeper`: with SESSION_IDLE_ACTION=snapshot, what snapshots a quiet thread's
        sandbox before it goes."""
        # A thread this process does not hold is reaped only once claimed (with replicas,
        # its owner might be using it), and let go again after.
        self.claim = claim or _always
        self.release = release or let_go_nothing
        self._threads = threads
        self._store = store
        self._provider = provider
        self._view_for = view_for
        self._idle_timeout_s = upkeep.idle_timeout_s
        self._idle_action = upkeep.idle_action
        self._retain_s = upkeep.retain_s
        self._live_runs = live_runs  # the engine's: runs whose task is alive here
        self._repair_grace_s = upkeep.repair_grace_s
        self._clock = clock
        self._reaper: asyncio.Task[None] | None = None
        # key -> the last activity when this process stopped its sandbox (stopped once,
        # until the thread is used again)
        self._stopped: dict[str, float] = {}
        self._evicting: set[str] = set()  # threads whose sandbox goes to make room now
        self._keeper = keeper if upkeep.idle_action == "snapshot" else None
        provider.on_full(self.make_room)

    async def restore(self) -> list[RunRecord]:
        """After a start: reattach the sandboxes that still exist (stopping what a crash left
        running in them) and end the runs a crash cut off; returns those runs."""
        for record in await self._store.sessions_holding_sandboxes():
            if record.state == "active" and record.key not in self._threads:
                thread = await self._threads.load(record.key)
                if thread.session.sandbox_id is not None:
                    self._threads.hold(record.key, thread)
        interrupted = await self._store.runs_in_flight()
        for run in interrupted:
            await self._store.end_run(run.run_id, "interrupted", self._clock())
        return interrupted

    async def tell_interrupted(self, runs: list[RunRecord]) -> None:
        for run in runs:
            try:
                await self._view_for(run.key)(RunInterrupted("restart"))
            except Exception:
                log.exception("telling %s about an interrupted run failed", run.key)

    async def owned_sandbox_ids(self) -> set[str]:
        """Sandboxes that sessions hold, in this process or in the store; not those stopped
        and kept past SESSION_RETAIN_S (the reaper or the orphan sweeper deletes them)."""
        now = self._clock()
        in_flight = {run.key for run in await self._store.runs_in_flight()}
        # Only a session whose record names a sandbox can hold one (not the whole store).
        records = {r.key: r for r in await self._store.sessions_holding_sandboxes()}
        owned: set[str] = set()
        for key in records.keys() | self._threads.keys():
            record, thread = records.get(key), self._threads.get(key)
            held = {record.sandbox_id if record else None}
            held.add(thread.session.sandbox_id if thread else None)
            busy = key in in_flight or (thread is not None and thread.busy)
            if busy or not self._past_retention(now - self._last(record, thread, now)):
                owned |= {sandbox_id for sandbox_id in held if sandbox_id}
        return owned

    def start_reaper(self, interval_s: float | None = None) -> None:
        if self._reaper is None:
            every = interval_s or max(0.5, min(30.0, self._idle_timeout_s / 4))
            self._reaper = asyncio.create_task(self._reap_forever(every))

    def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()

    async def reap(self) -> list[str]:
        """Shut down the sandboxes of threads quiet for longer than the idle timeout: delete
        them, or stop them and delete them once kept for the retention time."""
        now, reaped = self._clock(), []
        in_flight = await self.repair(now)
        for record in await self._candidates(now):
            key, thread = record.key, self._threads.get(record.key)
            if key in in_flight or (thread and thread.busy):
                continue
            last = self._last(record, thread, now)
            if now - last < self._idle_timeout_s:
                continue
            if thread is None and not await self.claim(key):
                continue  # another replica holds it
            if thread is not None and not await self._still_ours(key, thread):
                continue
            try:
                if await self._reap_one(record, thread, now, last):
                    reaped.append(key)
            finally:
                if thread is None:
                    await self.release(key)
            if thread is not None:
                await self._drop(key, thread)
        return reaped

    async def make_room(self, for_key: str) -> bool:
        """The cap on live sandboxes is reached and `for_key` needs one: stop or delete the
        sandbox of the least recently used thread held here, as the idle teardown does (it
        resumes on its next message). False if every one is in use (a run going, a file
        coming in) or already going."""
        candidates = sorted(
            (thread.last_activity, key)
            for key, thread in self._threads.items()
            if key != for_key and self._evictable(key, thread)
        )
        for _, key in candidates:
            thread = self._threads.get(key)
            if thread is None or not self._evictable(key, thread):
                continue  # changed while an earlier candidate was tried
            self._evicting.add(key)
            try:
                if await self._evict(key, thread):
                    log.info("thread %s: its sandbox went to make room for %s", key, for_key)
                    return True
            except Exception:
                log.exception("could not free the sandbox of %s", key)
            finally:
                self._evicting.discard(key)
        return False

    def _evictable(self, key: str, thread: ThreadState) -> bool:
        """Whether the thread's sandbox holds a slot that may go now: it exists, runs (not
        stopped at its last activity), and nothing uses it or is freeing it already."""
        return (
            key not in self._evicting
            and not thread.busy
            and not thread.session.in_use
            and thread.session.sandbox_id is not None
            and self._stopped.get(key) != thread.last_activity
        )

    async def _evict(self, key: str, thread: ThreadState) -> bool:
        record = await self._store.get_session(key)
        if record is None or not await self._still_ours(key, thread):
            return False
        # No await from this check to the teardown taking the session's turn: a question
        # that comes meanwhile waits for the teardown, then resumes as after one.
        if thread.busy or thread.session.in_use:
            return False
        now, last = self._clock(), thread.last_activity
        if not await self._reap_one(record, thread, now, last, for_room=True):
            return False
        await self._drop(key, thread)
        return True

    async def _candidates(self, now: float) -> list[SessionRecord]:
        """The sessions a pass may act on: those whose record names a sandbox and that have
        been quiet for the idle timeout (from the store's index of them), and those held
        here and quiet as long by this process's clock. A session done long ago, with no
        sandbox and not in memory, is not read at all."""
        quiet_since = now - self._idle_timeout_s
        found = await self._store.sessions_holding_sandboxes(quiet_since)
        records = {r.key: r for r in found}
        held = [k for k, t in self._threads.items() if t.last_activity <= quiet_since]
        for key in [k for k in held if k not in records]:
            if (record := await self._store.get_session(key)) is not None:
                records[key] = record
        return sorted(records.values(), key=lambda r: (-r.last_activity, r.key))

    async def _still_ours(self, key: str, thread: ThreadState) -> bool:
        """Whether the store still takes this copy's writes (with replicas, one held here may
        have been taken over while this process was cut off). A stale copy leaves memory
        untouched: its sandbox is the new owner's now, not this reaper's to shut down."""
        if thread.token is None:
            return True  # nothing to fence: one process alone
        try:
            await self._store.update_session(key, token=thread.token)  # the check alone
            return True
        except Fenced:
            log.warning("thread %s: taken over by another replica; dropped here", key)
            await self._threads.drop_stale(key, thread)
            return False

    async def _drop(self, key: str, thread: ThreadState) -> None:
        """A quiet thread whose sandbox is gone or stopped leaves this process's memory (its
        session, history, files); its next event loads it from the store again."""
        if self._threads.get(key) is not thread or thread.busy:
            return
        if thread.session.sandbox_id is not None and key not in self._stopped:
            return  # its sandbox still runs: a failed teardown, tried again next pass
        self._threads.remove(key, thread)
        await self._store.update_session(
            key, last_activity=thread.last_activity, token=thread.token
        )
        await thread.session.close(destroy=False)
        # With replicas its lease goes too, so any replica may reap or serve it next.
        await self.release(key)
        if key in self._threads:  # an event came in meanwhile and loaded it again
            await self.claim(key)

    async def repair(self, now: float) -> set[str]:
        """End the runs the store has in flight that no task here runs, once older than the
        grace (their end could not be written: a store blip); with replicas only those of a
        thread held here or claimed. Returns the keys with runs still in flight."""
        still: set[str] = set()
        for run in await self._store.runs_in_flight():
            young = now - run.started_at < self._repair_grace_s
            if run.run_id in self._live_runs or young or not await self._repair_one(run, now):
                still.add(run.key)
        return still

    async def _repair_one(self, run: RunRecord, now: float) -> bool:
        held = run.key in self._threads
        if not held and not await self.claim(run.key):
            return False  # another replica runs it, or will end it
        try:
            if not held:  # taken over: whoever held it before may write no more
                await self._store.fence(run.key)
            await self._store.end_run(run.run_id, "interrupted", now)
            log.warning("ended run %s of %s, left in flight, as interrupted", run.run_id, run.key)
            return True
        except Exception as exc:
            log.warning("could not end run %s left in flight: %s", run.run_id, exc)
            return False
        finally:
            if not held:
                await self.release(run.key)

    async def _reap_one(
        self,
        record: SessionRecord,
        thread: ThreadState | None,
        now: float,
        last: float,
        *,
        for_room: bool = False,
    ) -> bool:
        """Stop or shut down one quiet thread's sandbox, as the idle action says."""
        key = record.key
        if self._idle_action == "stop" and not self._past_retention(now - last):
            if self._stopped.get(key) != last and await self._stop(record, thread):
                self._stopped[key] = last
                await self._tell_suspended(key, self._retain_s, for_room)
                return True
            return False
        keep = functools.partial(self._keeper.keep, key) if self._keeper else None
        if not await self._suspend(record, thread, keep):
            return False
        if self._idle_action != "stop":  # a kept one's thread was told when stopped
            snapshot = self._keeper is not None and bool(await self._store.snapshot_of(key))
            await self._tell_suspended(key, for_room=for_room, snapshot=snapshot)
        self._stopped.pop(key, None)
        return True

    async def drain(self, grace_s: float) -> list[str]:
        """Let running turns finish within `grace_s`, cancel the rest (recorded as
        interrupted) and wait for the workers. Returns the keys whose runs were cut."""
        self.stop_reaper()
        running = {k: t.current for k, t in self._threads.items() if t.running and t.current}
        if running:
            await asyncio.wait(running.values(), timeout=grace_s)
        cut = [key for key, task in running.items() if not task.done()]
        for key in cut:
            running[key].cancel()
        workers = [t.worker for t in self._threads.values() if t.worker]
        await asyncio.gather(*workers, return_exceptions=True)
        return cut

    def _last(self, record: SessionRecord | None, thread: ThreadState | None, now: float) -> float:
        """When the thread was last active (this process knows best, if it holds it)."""
        return thread.last_activity if thread else record.last_activity if record else now

    def _past_retention(self, quiet_s: float) -> bool:
        return self._idle_action == "stop" and quiet_s >= self._idle_timeout_s + self._retain_s

    async def _stop(self, record: SessionRecord, thread: ThreadState | None) -> bool:
        """Stop the sandbox but keep it; False if there was none (or it failed: next pass)."""
        try:
            if thread is not None:
                return await thread.session.stop_sandbox()
            if record.state != "active" or not record.sandbox_id:
                return False
            sandbox = await self._provider.attach(record.sandbox_id)
            if sandbox is None:  # gone already
                await self._store.update_session(record.key, sandbox_id=None, state="idle")
                return False
            await sandbox.stop()
            return True
        except BotError as exc:
            log.warning("could not stop %s's sandbox: %s", record.key, exc)
            return False

    async def _suspend(
        self, record: SessionRecord, thread: ThreadState | None, keep: Keep | None = None
    ) -> bool:
        """Delete the thread's sandbox (`keep` given its id first, to snapshot it)."""
        if thread is not None and thread.session.sandbox_id is not None:
            await thread.session.suspend(keep)  # the session records its sandbox as gone
            return True
        if thread is not None or record.state != "active" or not record.sandbox_id:
            return False
        try:  # a thread this process never loaded: its sandbox goes by id
            if keep is not None:
                await keep(record.sandbox_id)
            await self._provider.destroy_id(record.sandbox_id)
        except BotError as exc:
            log.warning("could not shut down %s's sandbox: %s", record.key, exc)
            return False
        await self._store.update_session(record.key, sandbox_id=None, state="idle")
        return True

    async def _tell_suspended(
        self, key: str, kept_s: float = 0.0, for_room: bool = False, *, snapshot: bool = False
    ) -> None:
        try:
            await self._view_for(key)(SandboxSuspended(kept_s, for_room, snapshot))
        except Exception:
            log.exception("telling %s about its idle teardown failed", key)

    async def _reap_forever(self, every: float) -> None:
        while True:
            await asyncio.sleep(every)
            try:
                await self.reap()
            except Exception:
                log.exception("reaping idle sessions failed")
