"""A fake Anthropic Messages API: a real aiohttp server on loopback, scripted per request.

Strict where the Messages API reference is clear: request validation, per-model rules
(``max_tokens`` caps, context windows, thinking), signed thinking and compaction blocks
that must come back unchanged, a prompt cache that matches prefixes byte for byte and
forgets them after their TTL, and the context-management betas named in
``anthropic-beta``. A test fails when its script raises or an injected fault goes unused.
The server is in ``api``; the other modules are its parts (see ``api``'s docstring).
"""

from tests.fakes.anthropic.api import (
    KNOWN_MODELS,
    MAX_REQUEST_BYTES,
    DropConnection,
    FakeAnthropic,
    Fault,
    HttpError,
    ModelFn,
    ModelRequest,
    Reply,
    StreamError,
    ToolResult,
    drop_connection,
    http_error,
    redacted_thinking,
    stream_error,
    text,
    thinking,
    tool_use,
)

__all__ = [
    "KNOWN_MODELS",
    "MAX_REQUEST_BYTES",
    "DropConnection",
    "FakeAnthropic",
    "Fault",
    "HttpError",
    "ModelFn",
    "ModelRequest",
    "Reply",
    "StreamError",
    "ToolResult",
    "drop_connection",
    "http_error",
    "redacted_thinking",
    "stream_error",
    "text",
    "thinking",
    "tool_use",
]
