"""What stands before the fake Buddy's handlers: injected faults, token scopes, the rate
limit, and the error body.

Scopes follow the newer docs (§2.3): GET routes need SANDBOX_READ, the others
SANDBOX_WRITE, /identifiers needs WORKSPACE; a token without the scope gets 403 naming it
(the wording is ours: the document gives none). Rate limits use the headers the document
says Buddy sends (§6.6): every answer carries X-Rate-Limit-Limit, -Remaining and -Reset
(Unix seconds); a request past the limit gets 429 with them, and no Retry-After, which the
document does not mention.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass

from aiohttp import web

from tests.fakes.buddy.state import ApiError, RecordedRequest
from tests.fakes.buddy.vm import VmError, VmGone

DEFAULT_FAULT_MESSAGES = {
    429: "Too many requests",
    500: "Internal server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
}
READ, WRITE, WORKSPACE = "SANDBOX_READ", "SANDBOX_WRITE", "WORKSPACE"
ALL_SCOPES = frozenset((READ, WRITE, WORKSPACE))
# where a request keeps the rate limit headers of its answer
RATE_HEADERS = web.RequestKey("buddy_rate_headers", dict[str, str])


@dataclass
class Fault:
    remaining: int
    method: str | None
    path: str | None
    status: int
    reset_after: float | None
    message: str | None
    drop: bool
    delay_s: float
    after: bool

    def matches(self, request: RecordedRequest) -> bool:
        if self.method is not None and self.method.upper() != request.method:
            return False
        return self.path is None or re.search(self.path, request.path) is not None


def check_access(
    request: web.Request, token: str, workspace: str, enabled: bool, scopes: Collection[str]
) -> None:
    """401 for a wrong token, 404 for another workspace, 403 for a disabled API or a scope
    the token lacks, in that order."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or given != token:
        raise ApiError(401, "Invalid or expired token")
    if request.match_info.get("ws", workspace) != workspace:
        raise ApiError(404, "Workspace not found")
    if not enabled:
        raise ApiError(403, "API is disabled in this workspace")
    scope = needed_scope(request)
    if scope is not None and scope not in scopes:
        raise ApiError(403, scope_error(scope))


def needed_scope(request: web.Request) -> str | None:
    """The scope a route needs (None for a path the API does not have)."""
    route = request.match_info.route
    if route.resource is None:
        return None
    if route.resource.canonical.endswith("/identifiers"):
        return WORKSPACE
    return READ if request.method == "GET" else WRITE


def scope_error(scope: str) -> str:
    return f"Insufficient scope: this token needs {scope}"


@dataclass
class RateLimit:
    """A fixed window of `limit` requests per `window_s` seconds, for one token.

    Buddy publishes no figure (the sandbox notes, §6.6; its API FAQ only says support may
    raise a limit on request). The one number in its docs is the sample answer of the API's
    Hello World and overview pages (buddy.works/docs/api/getting-started/hello-world):
    `X-Rate-Limit-Remaining: 999` after one request, a budget of 1000 requests, for an
    unstated window. The default takes the stricter plausible reading: 1000 requests per
    hour per token.
    """

    limit: int = 1000
    window_s: float = 3600.0
    _start: float = 0.0
    _used: int = 0

    def take(self) -> tuple[bool, dict[str, str]]:
        """Whether one more request is allowed now, and the headers for its answer."""
        now = time.time()
        if now >= self._start + self.window_s:
            self._start, self._used = now, 0
        allowed = self._used < self.limit
        self._used += allowed
        return allowed, self.headers()

    def headers(self, reset_after: float | None = None) -> dict[str, str]:
        reset = self._start + self.window_s if reset_after is None else time.time() + reset_after
        remaining = 0 if reset_after is not None else self.limit - self._used
        return {
            "X-Rate-Limit-Limit": str(self.limit),
            "X-Rate-Limit-Remaining": str(remaining),
            "X-Rate-Limit-Reset": str(math.ceil(reset)),
        }


async def add_rate_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: every answer, streamed ones too, carries the rate headers."""
    response.headers.update(request.get(RATE_HEADERS, {}))


async def as_buddy_answers(
    request: web.Request, answer: Awaitable[web.StreamResponse]
) -> web.StreamResponse:
    """`answer`, with the errors raised on the way answered as Buddy words them."""
    try:
        return await answer
    except ApiError as err:
        return error(err.status, err.message)
    except web.HTTPException as err:
        if err.status == 404:
            return error(404, f"Not found: {request.method} {request.path}")
        return error(err.status, err.reason)
    except VmGone:
        return error(404, "Sandbox not found")
    except VmError as err:
        return error(500, str(err))


def error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"errors": [{"message": message}]}, status=status, headers=headers)


async def fault_response(request: web.Request, fault: Fault, rate: RateLimit) -> web.StreamResponse:
    if fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault.drop:
        if request.transport is not None:  # None: the client has already left
            request.transport.close()
        return web.StreamResponse()
    if fault.status == 429:
        request[RATE_HEADERS] = rate.headers(reset_after=fault.reset_after or 0.0)
    message = fault.message or DEFAULT_FAULT_MESSAGES.get(fault.status, "Injected failure")
    return error(fault.status, message)
