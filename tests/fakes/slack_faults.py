"""Faults a test injects into the fake Slack's Web API: the next calls to a method answered
with an error (a 429 with ``Retry-After``, or an ordinary ``ok: false``)."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class Fault:
    status: int
    retry_after: int
    error: str

    def response(self) -> web.Response:
        headers = {"Retry-After": str(self.retry_after)} if self.status == 429 else {}
        body = {"ok": False, "error": self.error}
        return web.json_response(body, status=self.status, headers=headers)


class Faults:
    def __init__(self) -> None:
        self._queued: defaultdict[str, deque[Fault]] = defaultdict(deque)

    def add(self, method: str, fault: Fault, n: int) -> None:
        self._queued[method].extend([fault] * n)

    def take(self, method: str) -> Fault | None:
        """The next fault for a call to `method`, if one is waiting (it is used up)."""
        queued = self._queued.get(method)
        return queued.popleft() if queued else None
