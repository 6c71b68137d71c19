"""How long a Buddy API request may take, and when it is resent.

Retries follow the official Python SDK: idempotent reads are retried on 5xx, timeouts and
network errors; 429 is waited out for any request whose body can be sent again; creating a
sandbox, posting a command, uploading and deleting are never retried blindly. A request
that could not even connect was never sent, so resending it is always safe.

A 429 is waited out until X-Rate-Limit-Reset (Unix seconds), the header the document says
Buddy sends and the Go SDK honours; nothing says Buddy sends Retry-After, so it is not read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Literal

import httpx

REQUEST_TIMEOUT_S = 30.0  # the wait for an ordinary answer; the others derive from it
READ_ATTEMPTS = 4  # sleeping base, 2 x base, 4 x base between them
RATE_LIMIT_WAITS = 3
RATE_LIMIT_MAX_WAIT_S = 60.0

# How long a request may take, by kind (see `request_timeouts`).
TimeoutKind = Literal["default", "create", "command", "stream"]


def request_timeouts(base_s: float = REQUEST_TIMEOUT_S) -> dict[TimeoutKind, httpx.Timeout]:
    """httpx timeouts by kind of request, from the wait for an ordinary answer."""
    return {
        "default": httpx.Timeout(base_s),
        "create": httpx.Timeout(2 * base_s, connect=base_s),
        # Buddy holds a command's POST while the sandbox boots
        "command": httpx.Timeout(4 * base_s, connect=base_s),
        # followed logs, downloads and uploads last as long as the data does; only
        # connecting and waiting for a pooled connection are bounded
        "stream": httpx.Timeout(None, connect=base_s, pool=base_s),
    }


def retry_delay(headers: Mapping[str, str], fallback: float, *, now: float | None = None) -> float:
    """Seconds to wait after a 429: until `X-Rate-Limit-Reset`, or `fallback` when there is
    no such time ahead (none sent, or a reset already past by this machine's clock, where
    retrying at once could spend every wait in a burst); capped at RATE_LIMIT_MAX_WAIT_S."""
    reset = httpx.Headers(headers).get("x-rate-limit-reset")
    now = time.time() if now is None else now
    delay = _until(reset, now) if reset else None
    return min(delay if delay is not None and delay > 0 else fallback, RATE_LIMIT_MAX_WAIT_S)


def _until(reset: str, now: float) -> float | None:
    with contextlib.suppress(ValueError):
        at = float(reset)
        return (at / 1000 if at > 1e11 else at) - now  # tolerate milliseconds
    return None
