"""What a script answers: the next assistant reply, or a fault to inject."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tests.fakes.anthropic.blocks import Block

if TYPE_CHECKING:
    from tests.fakes.anthropic.request import ModelRequest

# Doc 1.7: HTTP status by error type.
ERROR_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
STATUS_BY_ERROR_TYPE = {v: k for k, v in ERROR_TYPE_BY_STATUS.items()}
# Doc 1.7: a 429 carries `retry-after` (one from a monthly spend cap does not: pass None), and
# so does a 529 here. The other statuses the SDK retries (2.3) get it too, to keep tests fast.
SDK_RETRIED = (408, 409, 429)
DEFAULT = object()  # "not given": the status decides


@dataclass
class Reply:
    """The next assistant message."""

    content: list[Block]
    stop_reason: str | None = None  # derived from the content when None
    stop_details: dict[str, Any] | None = None
    stop_sequence: str | None = None
    usage: dict[str, Any] | None = None  # merged over the computed usage
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.stop_reason is None:
            has_tool_use = any(b.get("type") == "tool_use" for b in self.content)
            self.stop_reason = "tool_use" if has_tool_use else "end_turn"


@dataclass(frozen=True)
class HttpError:
    status: int
    type: str
    message: str
    retry_after_ms: int | None = None
    should_retry: bool | None = None
    error_code: str | None = None
    retry_after_s: int | None = None  # `retry-after` alone, as the API sends it

    def headers(self) -> dict[str, str]:
        """`retry-after` in whole seconds as the API sends it, plus the SDK's `retry-after-ms`
        (which it reads first), so tests need not wait a second per retry. With
        ``retry_after_s``, `retry-after` alone: a long wait a test must not sit through."""
        headers = {}
        if self.retry_after_s is not None:
            headers["retry-after"] = str(self.retry_after_s)
        elif self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
            headers["retry-after"] = str(max(1, -(-self.retry_after_ms // 1000)))
        if self.should_retry is not None:
            headers["x-should-retry"] = "true" if self.should_retry else "false"
        return headers


@dataclass(frozen=True)
class StreamError:
    type: str
    message: str
    after_blocks: int = 0
    content: list[Block] | None = None  # blocks sent before the error (placeholders if None)


@dataclass(frozen=True)
class DropConnection:
    after_blocks: int = 0
    content: list[Block] | None = None


Fault = HttpError | StreamError | DropConnection
ModelFn = Callable[["ModelRequest"], Reply | Fault | Awaitable[Reply | Fault]]


def default_message(error_type: str) -> str:
    return {"overloaded_error": "Overloaded", "api_error": "Internal server error"}.get(
        error_type, error_type.replace("_", " ").capitalize()
    )


def http_error(
    status: int = 529,
    type: str | None = None,
    *,
    message: str | None = None,
    retry_after_ms: Any = DEFAULT,
    should_retry: bool | None = None,
    error_code: str | None = None,
    retry_after_s: int | None = None,
) -> HttpError:
    """A non-2xx JSON error response; ``type`` defaults from the status. A status the SDK
    retries carries ``retry-after`` (1 ms unless given; None for none, as on a 429 from a
    spend cap, doc 1.7). ``retry_after_s`` sends `retry-after: N` alone, a long ask such as
    120 that the SDK (2.x) honours whatever its size (doc 2.3)."""
    error_type = type or ERROR_TYPE_BY_STATUS.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    if retry_after_ms is DEFAULT:
        retry_after_ms = 1 if status in SDK_RETRIED or status >= 500 else None
    return HttpError(
        status,
        error_type,
        message or default_message(error_type),
        retry_after_ms,
        should_retry,
        error_code,
        retry_after_s,
    )


def stream_error(
    type: str = "overloaded_error",
    after_blocks: int = 0,
    *,
    message: str | None = None,
    content: list[Block] | None = None,
) -> StreamError:
    """An HTTP 200 stream that sends ``message_start`` and N blocks, then ``event: error``.

    A non-streaming request gets the equivalent HTTP error instead.
    """
    return StreamError(type, message or default_message(type), after_blocks, content)


def drop_connection(after_blocks: int = 0, *, content: list[Block] | None = None) -> DropConnection:
    """Close the TCP connection after N streamed blocks (before any response if not streaming)."""
    return DropConnection(after_blocks, content)


def as_http_error(fault: StreamError) -> HttpError:
    """A stream error for a request that did not stream: the same error as an HTTP status."""
    return http_error(STATUS_BY_ERROR_TYPE.get(fault.type, 500), fault.type, message=fault.message)


def summary(faults: Iterable[Fault]) -> str:
    """Faults counted by kind, e.g. ``2 × HttpError(529)``."""
    counts = Counter(
        f"{type(f).__name__}({f.status})" if isinstance(f, HttpError) else type(f).__name__
        for f in faults
    )
    return ", ".join(f"{n} × {kind}" for kind, n in counts.items())
