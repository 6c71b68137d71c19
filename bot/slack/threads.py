"""Slack threads as engine keys."""

from __future__ import annotations

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
