"""The threads this process holds in memory: the only owner of them.

A thread is loaded from the store at its first event here (its session, history, files,
and its sandbox if that still exists) and leaves memory when the lifecycle reaps it or it
is taken over by another replica. The engine, its run worker and the lifecycle all reach
threads through this table; nobody else holds one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, ItemsView, KeysView, ValuesView
from typing import Any

from bot.datacard import DataCard
from bot.datacard.data_file import DataFile
from bot.sandbox.base import Sandbox, SandboxProvider
from bot.sessions.factory import SessionFactory
from bot.sessions.files import FileOpener
from bot.sessions.session import Intake
from bot.sessions.snapshots import SnapshotKeeper
from bot.sessions.thread import ThreadState
from bot.store.base import FileRecord, SessionRecord, Store

OpenerFor = Callable[[dict[str, Any]], FileOpener]  # a stored file source -> its bytes again


class ThreadTable:
    def __init__(
        self,
        store: Store,
        sessions: SessionFactory,
        opener_for: OpenerFor,
        clock: Callable[[], float] = time.time,
        keeper: SnapshotKeeper | None = None,
    ) -> None:
        """`keeper`: with SESSION_IDLE_ACTION=snapshot, the snapshots threads resume from."""
        self._keeper = keeper
        self._store = store
        self._sessions = sessions
        self._opener_for = opener_for
        self._clock = clock
        self._threads: dict[str, ThreadState] = {}
        # key -> the fencing token taken when this process last took the thread over; kept
        # while the thread leaves memory (its lease may still be held here)
        self._tokens: dict[str, int] = {}

    # -- what is held --

    def get(self, key: str) -> ThreadState | None:
        return self._threads.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._threads

    def keys(self) -> KeysView[str]:
        return self._threads.keys()

    def values(self) -> ValuesView[ThreadState]:
        return self._threads.values()

    def items(self) -> ItemsView[str, ThreadState]:
        return self._threads.items()

    def hold(self, key: str, thread: ThreadState) -> None:
        self._threads[key] = thread

    def remove(self, key: str, thread: ThreadState | None = None) -> ThreadState | None:
        """Take the key's thread out of memory (only if it is still `thread`, when given)."""
        held = self._threads.get(key)
        if held is None or (thread is not None and held is not thread):
            return None
        return self._threads.pop(key)

    async def drop_stale(self, key: str, thread: ThreadState) -> None:
        """A copy whose writes the store refuses (its thread was taken over) leaves memory;
        its sandbox is left alone: it is the new owner's now."""
        if self.remove(key, thread) is not None:
            await thread.session.close(destroy=False)

    # -- fencing tokens --

    def token(self, key: str) -> int | None:
        """The fencing token this process's writes for the thread carry (None: unfenced)."""
        thread = self._threads.get(key)
        return thread.token if thread is not None else self._tokens.get(key)

    def take_token(self, key: str, token: int) -> None:
        self._tokens[key] = token

    def forget_token(self, key: str, token: int | None) -> None:
        """Forget the key's token if it is still `token` (a later take-over keeps its own)."""
        if self._tokens.get(key) == token:
            self._tokens.pop(key, None)

    # -- counts (metrics) --

    @property
    def runs_in_flight(self) -> int:
        return sum(thread.running for thread in self._threads.values())

    @property
    def live_sandboxes(self) -> int:
        return sum(t.session.sandbox_id is not None for t in self._threads.values())

    # -- loading --

    async def open(
        self, key: str, repo_url: str | None = None, *, start: bool = True
    ) -> ThreadState:
        """The key's thread (loaded from the store if not held), its sandbox under way unless
        not `start`, and its activity recorded."""
        thread = self._threads.get(key)
        if thread is None:
            thread = self._threads[key] = await self.load(key, repo_url)
        if start:
            thread.session.start()
        thread.last_activity = self._clock()
        await self._store.update_session(
            key, last_activity=thread.last_activity, token=thread.token
        )
        return thread

    async def touch(self, key: str, repo_url: str | None = None) -> ThreadState:
        """The key's thread, opened if it is not yet; one opened already is only touched in
        memory (`open` has recorded the activity)."""
        thread = self._threads.get(key)
        if thread is None:
            return await self.open(key, repo_url)
        thread.session.start()
        thread.last_activity = self._clock()
        return thread

    async def load(self, key: str, repo_url: str | None = None) -> ThreadState:
        """The key's thread as the store has it (made there if new), not held yet."""
        record = await self._store.get_session(key)
        now = self._clock()
        if record is None:
            record = SessionRecord(key, None, "active", repo_url, now, now)
            await self._store.save_session(record)
        token = self._tokens.get(key)  # this copy's writes carry it, even after a take-over
        session = self._sessions.new(
            key,
            record.repo_url,
            history=await self._store.load_history(key),
            checkpoint=lambda history, archive: self._store.save_history(
                key, history, token=token, archive=archive
            ),
            on_sandbox=lambda sandbox_id: self._sandbox_changed(key, sandbox_id, token),
        )
        intakes = [self._intake(f) for f in await self._store.files(key)]
        sandbox = await self._attach(record, token)
        snapshot = await self._store.snapshot_of(key) if self._keeper else None
        if sandbox is not None:
            session.attach(sandbox, intakes)
        elif intakes or snapshot:
            session.remember(intakes, snapshot)
        last = record.last_activity if sandbox else now
        return ThreadState(session, last_activity=last, token=token)

    async def _attach(self, record: SessionRecord, token: int | None) -> Sandbox | None:
        """The stored session's sandbox if it still exists; otherwise it is noted as gone."""
        if record.state != "active" or not record.sandbox_id:
            return None
        sandbox = await self._provider.attach(record.sandbox_id)
        if sandbox is None:
            await self._store.update_session(
                record.key, sandbox_id=None, state="closed", token=token
            )
        return sandbox

    @property
    def _provider(self) -> SandboxProvider:
        return self._sessions.provider

    def _intake(self, file: FileRecord) -> Intake:
        header = str(file.source.get("header", ""))
        cards = tuple(DataCard.from_dict(card) for card in file.cards)
        data = DataFile(file.sandbox_path, file.size, header, cards)
        return Intake(file.name, data, self._opener_for(file.source), file.sha256)

    async def _sandbox_changed(self, key: str, sandbox_id: str | None, token: int | None) -> None:
        state = "active" if sandbox_id else "idle"
        await self._store.update_session(key, sandbox_id=sandbox_id, state=state, token=token)
        if sandbox_id and self._keeper is not None:
            await self._keeper.used(key)  # made from its snapshot, or afresh: it goes
