"""Slack threads as engine keys, and who clicked a button in one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def channel_of(key: str) -> str | None:
    """The channel of a thread's key (what its SQL connections are granted by); None for
    a key of another front end."""
    ref = ThreadRef.parse(key)
    return ref.channel if ref is not None else None


@dataclass(frozen=True)
class Click:
    """Who clicked one of the bot's buttons, and where (for a private answer)."""

    user: str
    channel: str
    thread_ts: str | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Click:
        """From a block_actions payload."""
        message = body.get("message") or {}
        channel = (body.get("channel") or {}).get("id") or ""
        thread_ts = message.get("thread_ts") or message.get("ts")
        return cls((body.get("user") or {}).get("id") or "", channel, thread_ts)

    def in_thread(self, key: str) -> bool:
        """Whether `key` names the thread clicked in: a button's value is only trusted for
        the thread its message is in (a payload naming another thread's run or key is
        refused, whoever sent it)."""
        ref = ThreadRef.parse(key)
        return ref is not None and (ref.channel, ref.ts) == (self.channel, self.thread_ts)
