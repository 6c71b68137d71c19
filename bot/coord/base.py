"""The coordination seam. One process needs none of it (`LocalCoordinator`); several
replicas share a Redis (`coord.redis.RedisCoordinator`).

A thread has one owner at a time: the replica holding its lease handles every event of
the thread (questions, files, Stop and Continue clicks), so the engine's per-thread rules
(one run at a time, questions joined, one sandbox) hold across replicas as they do in one
process. A replica that receives an event for a thread another replica owns passes it on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

LEASE_S = 15.0  # by default a dead replica's threads and jobs are free again within this
Inbox = Callable[[dict[str, Any]], Awaitable[None]]  # a message passed on by another replica


class Coordinator(Protocol):
    replica: str  # this process's name among the replicas
    lease_s: float  # a lease lapses this long after its holder last renewed it

    async def open(self, inbox: Inbox) -> None:
        """Start: messages for this replica go to `inbox`."""

    async def close(self) -> None:
        """Let go of every lease (threads and jobs) and stop listening."""

    async def claim(self, key: str) -> tuple[str, bool]:
        """The thread's owner after trying to become it (this replica's name when the lease
        was free or ours already, else the holder's), and whether this replica took it just
        now. A held lease is renewed until released; a dead replica's lapses in seconds."""

    async def release(self, key: str) -> None: ...

    async def take_from(self, key: str, owner: str) -> bool:
        """Take the thread's lease from `owner`, which no longer listens (it died and its
        lease has not lapsed yet); False if the lease has moved on meanwhile."""

    async def owner(self, key: str) -> str | None: ...

    async def send(self, replica: str, message: dict[str, Any]) -> bool:
        """Pass a message to a replica's inbox; False when nobody is listening there."""

    async def first_time(self, *ids: str) -> bool:
        """True the first time any replica sees these event ids (a redelivery: False)."""

    async def job(self, name: str) -> bool:
        """Whether this replica runs the named background job now (one replica does)."""

    @property
    def held(self) -> int:
        """Thread leases held by this replica."""


class Seen:
    """A bounded memory of event and message ids, so redeliveries are answered once."""

    def __init__(self, size: int = 10_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def first_time(self, *ids: str) -> bool:
        if any(i in self._ids for i in ids if i):
            return False
        for i in filter(None, ids):
            self._ids[i] = None
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)
        return True


class LocalCoordinator:
    """One process: it owns every thread and runs every job."""

    replica = "local"
    lease_s = LEASE_S

    def __init__(self) -> None:
        self._seen = Seen()
        self._held: set[str] = set()

    async def open(self, inbox: Inbox) -> None:
        pass

    async def close(self) -> None:
        self._held.clear()

    async def claim(self, key: str) -> tuple[str, bool]:
        self._held.add(key)
        return self.replica, False  # nobody else could have moved it on

    async def release(self, key: str) -> None:
        self._held.discard(key)

    async def take_from(self, key: str, owner: str) -> bool:
        return False  # nobody to take from

    async def owner(self, key: str) -> str | None:
        return self.replica if key in self._held else None

    async def send(self, replica: str, message: dict[str, Any]) -> bool:
        return False  # there is no other replica

    async def first_time(self, *ids: str) -> bool:
        return self._seen.first_time(*ids)

    async def job(self, name: str) -> bool:
        return True

    @property
    def held(self) -> int:
        return len(self._held)
