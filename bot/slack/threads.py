"""Slack threads as engine keys, and a memory of events already handled."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadRef:
    team: str
    channel: str
    ts: str

    @property
    def key(self) -> str:
        return f"{self.team}:{self.channel}:{self.ts}"

    @classmethod
    def parse(cls, key: str) -> ThreadRef | None:
        """The thread a key names, or None for a key of another front end (the terminal)."""
        parts = key.split(":", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            return None
        return cls(*parts)


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
