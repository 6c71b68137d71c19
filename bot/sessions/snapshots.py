"""Snapshots of quiet threads' sandboxes (SESSION_IDLE_ACTION=snapshot, Buddy only).

When a thread goes quiet, its sandbox's disk is kept as a snapshot, recorded for the
thread in the store, and the sandbox deleted. The thread's next message makes its sandbox
from the snapshot (`thread_table`), /buddy/work as it was, with no files uploaded again;
the snapshot is deleted once a new sandbox is recorded for the thread.

The bot keeps at most BUDDY_SNAPSHOTS_MAX snapshots (named with the bot's prefix); past
that the oldest goes, and its thread starts afresh. A snapshot no stored thread names (its
session was pruned, or a crash came between taking it and recording it) is deleted by the
sweep, like an orphan sandbox."""

from __future__ import annotations

import logging
import secrets
import time

from bot.errors import BotError
from bot.sandbox.base import Snapshots
from bot.store.base import Store, StoreError

log = logging.getLogger(__name__)

MIN_AGE_S = 600.0  # a snapshot younger than this may be one being recorded right now


class SnapshotKeeper:
    def __init__(self, provider: Snapshots, store: Store, *, tag: str, max_kept: int) -> None:
        self._provider, self._store = provider, store
        self._prefix = f"{tag}-"
        self._max_kept = max_kept

    async def keep(self, key: str, sandbox_id: str) -> str | None:
        """Snapshot the thread's sandbox and record it; its id, or None if that failed
        (the caller deletes the sandbox all the same: the files are fetched again)."""
        try:
            snapshot_id = await self._provider.take_snapshot(sandbox_id, self._name())
        except BotError as exc:
            log.warning("could not snapshot %s's sandbox: %s", key, exc)
            return None
        earlier = await self._store.snapshot_of(key)
        await self._store.set_snapshot(key, snapshot_id)
        if earlier:
            await self.forget(earlier)
        await self.trim()
        return snapshot_id

    def _name(self) -> str:
        """The prefix, then the time in milliseconds (so names sort in order of taking)."""
        return f"{self._prefix}{time.time_ns() // 1_000_000:014d}-{secrets.token_hex(3)}"

    async def forget(self, snapshot_id: str) -> None:
        try:
            await self._provider.delete_snapshot(snapshot_id)
        except BotError as exc:  # the sweep tries again
            log.warning("could not delete snapshot %s: %s", snapshot_id, exc)

    async def used(self, key: str) -> None:
        """The thread has a sandbox again: its snapshot is no longer needed."""
        if snapshot_id := await self._store.snapshot_of(key):
            await self._store.set_snapshot(key, None)
            await self.forget(snapshot_id)

    async def trim(self) -> list[str]:
        """Delete the oldest snapshots past the cap; returns their ids."""
        try:
            found = await self._provider.list_snapshots(self._prefix)
        except BotError as exc:
            log.warning("could not list snapshots: %s", exc)
            return []
        doomed = [s.id for s in found[: max(0, len(found) - self._max_kept)]]
        if doomed:
            by_snapshot = {sid: key for key, sid in (await self._store.snapshots()).items()}
            for snapshot_id in doomed:
                if key := by_snapshot.get(snapshot_id):
                    await self._store.set_snapshot(key, None)  # it starts afresh
                await self.forget(snapshot_id)
        return doomed

    async def sweep(self, now: float) -> list[str]:
        """Delete the bot's snapshots that no stored thread names; returns their ids."""
        try:
            found = await self._provider.list_snapshots(self._prefix)
            named = await self._named()
        except (BotError, StoreError) as exc:
            log.warning("snapshot sweep: %s", exc)
            return []
        doomed = [
            s.id
            for s in found
            if s.id not in named and (s.created_at is None or now - s.created_at >= MIN_AGE_S)
        ]
        for snapshot_id in doomed:
            await self.forget(snapshot_id)
        return doomed

    async def _named(self) -> set[str]:
        """The snapshots stored threads name; records of threads that are gone are dropped."""
        named = set()
        for key, snapshot_id in (await self._store.snapshots()).items():
            if await self._store.get_session(key) is None:
                await self._store.set_snapshot(key, None)
            else:
                named.add(snapshot_id)
        return named
