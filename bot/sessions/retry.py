"""A bounded exponential backoff, for store writes that must land (a run's end)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    attempts: int = 5
    first_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def delays(self) -> Iterator[float | None]:
        """One value per attempt: the wait before the next one, None after the last."""
        delay = self.first_delay_s
        for _ in range(self.attempts - 1):
            yield delay
            delay = min(delay * 2, self.max_delay_s)
        yield None
