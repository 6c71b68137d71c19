"""Faults a test injects into the fake Slack's Web API: the next calls to a method answered
with an error (a 429 with ``Retry-After``, or an ordinary ``ok: false``).

A fault that no call used up means the test did not exercise what it meant to, so the fake
reports it when it closes; ``optional`` faults are exempt (the test may not reach them).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class Fault:
    status: int
    retry_after: int
    error: str
    optional: bool = False

    def response(self) -> web.Response:
        headers = {"Retry-After": str(self.retry_after)} if self.status == 429 else {}
        body = {"ok": False, "error": self.error}
        return web.json_response(body, status=self.status, headers=headers)

    def __str__(self) -> str:
        return f"{self.error} (HTTP {self.status})"


class Faults:
    def __init__(self) -> None:
        self._queued: defaultdict[str, deque[Fault]] = defaultdict(deque)

    def add(self, method: str, fault: Fault, n: int) -> None:
        self._queued[method].extend([fault] * n)

    def take(self, method: str) -> Fault | None:
        """The next fault for a call to `method`, if one is waiting (it is used up)."""
        queued = self._queued.get(method)
        return queued.popleft() if queued else None

    def pending(self, *, required_only: bool = False) -> list[str]:
        """The faults no call has used yet, as "method: error (HTTP status)"."""
        return [
            f"{method}: {fault}"
            for method, queued in self._queued.items()
            for fault in queued
            if not (required_only and fault.optional)
        ]
