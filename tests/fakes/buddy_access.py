"""What stands before the fake Buddy's handlers: injected faults, and the error body."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import web

from tests.fakes.buddy_state import RecordedRequest

DEFAULT_FAULT_MESSAGES = {
    429: "Too many requests",
    500: "Internal server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
}


@dataclass
class Fault:
    remaining: int
    method: str | None
    path: str | None
    status: int
    retry_after: float | None
    message: str | None
    drop: bool
    delay_s: float
    after: bool

    def matches(self, request: RecordedRequest) -> bool:
        if self.method is not None and self.method.upper() != request.method:
            return False
        return self.path is None or re.search(self.path, request.path) is not None


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"errors": [{"message": message}]}, status=status, headers=headers)


async def fault_response(request: web.Request, fault: Fault) -> web.StreamResponse:
    if fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault.drop:
        if request.transport is not None:  # None: the client has already left
            request.transport.close()
        return web.StreamResponse()
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
        headers["X-Rate-Limit-Reset"] = str(int(time.time() + fault.retry_after + 0.999))
    message = fault.message or DEFAULT_FAULT_MESSAGES.get(fault.status, "Injected failure")
    return error(fault.status, message, headers)
