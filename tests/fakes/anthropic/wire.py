"""The fake's answers on the wire: SSE frames (doc 1.8), error bodies (1.7) and credentials."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from aiohttp import web

from tests.fakes.anthropic.blocks import Block, random_id, text

START_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation",
    "service_tier",
)
DELTA_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "output_tokens_details",
    "iterations",
)


# --------------------------------------------------------------------------- SSE


def sse(event: str, **fields: Any) -> bytes:
    """One SSE frame; the data's ``type`` repeats the event name."""
    return f"event: {event}\ndata: {json.dumps({'type': event, **fields})}\n\n".encode()


def _split(s: str, parts: int) -> list[str]:
    """``s`` in ``parts`` roughly equal non-empty pieces (fewer if ``s`` is short)."""
    parts = max(1, min(parts, len(s)))
    size = math.ceil(len(s) / parts) if s else 1
    return [s[i : i + size] for i in range(0, len(s), size)] or [s]


def _parts(s: str, parts: int, delta_chars: int | None) -> list[str]:
    """``s`` in ``parts`` pieces, or in pieces of ``delta_chars`` (the real API sends a few
    tokens per delta)."""
    return _split(s, -(-len(s) // delta_chars) if delta_chars else parts)


def _block_events(index: int, block: Block, delta_chars: int | None) -> Iterator[bytes]:
    kind = block.get("type")
    start: Block
    deltas: list[Block] = []
    if kind == "text":
        start = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in _parts(block["text"], 2, delta_chars)]
    elif kind in ("tool_use", "server_tool_use"):
        start = {**block, "input": {}}
        pieces = ["", *_parts(json.dumps(block.get("input", {})), 3, delta_chars)]
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": t} for t in _split(block["thinking"], 2)]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "compaction":  # the SDK's beta accumulator: signature at start, then content
        start = {"type": "compaction", "content": None, "signature": block.get("signature")}
        deltas = [{"type": "compaction_delta", "content": block.get("content")}]
    else:  # redacted_thinking, server tool results, ...: the whole block at start
        start = block
    yield sse("content_block_start", index=index, content_block=start)
    for delta in deltas:
        yield sse("content_block_delta", index=index, delta=delta)
    yield sse("content_block_stop", index=index)


def stream_blocks(message: dict[str, Any], delta_chars: int | None = None) -> Iterator[bytes]:
    """``message_start`` and ``ping``, then every content block (text and tool input in two
    or three deltas, or in deltas of ``delta_chars``)."""
    usage = {k: message["usage"][k] for k in START_USAGE_KEYS if k in message["usage"]}
    started = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    started.update(stop_details=None, usage={**usage, "output_tokens": 1})
    yield sse("message_start", message=started)
    yield sse("ping")
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block, delta_chars)


def stream_tail(message: dict[str, Any]) -> Iterator[bytes]:
    usage = {k: message["usage"][k] for k in DELTA_USAGE_KEYS if k in message["usage"]}
    delta = {k: message[k] for k in ("stop_reason", "stop_sequence", "stop_details")}
    extra = {k: message[k] for k in ("context_management",) if k in message}
    yield sse("message_delta", delta=delta, usage=usage, **extra)
    yield sse("message_stop")


def partial_blocks(n: int, content: list[Block] | None) -> list[Block]:
    blocks = list(content) if content is not None else []
    blocks += [text(f"partial block {i}") for i in range(len(blocks), n)]
    return blocks[:n]


async def stream(request: web.Request, chunks: Iterable[bytes]) -> web.StreamResponse:
    """Start an SSE response and write ``chunks``, one write per event."""
    response = web.StreamResponse(
        headers={"content-type": "text/event-stream", "cache-control": "no-cache", **id_header()}
    )
    await response.prepare(request)
    for chunk in chunks:
        await response.write(chunk)
    return response


def drop(request: web.Request, response: web.StreamResponse | None = None) -> web.StreamResponse:
    """Close the connection abruptly; whatever was written so far has been flushed."""
    assert request.transport is not None
    request.transport.close()
    return response if response is not None else web.StreamResponse()


# --------------------------------------------------------------------------- JSON


async def read_body(request: web.Request) -> tuple[bytes | None, Any]:
    """The raw body (None when even aiohttp's limit refused it) and its JSON, if any."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return None, None
    try:
        return raw, json.loads(raw)
    except ValueError:
        return raw, None


def lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def id_header() -> dict[str, str]:
    return {"request-id": random_id("req_")}


def check_auth(headers: dict[str, str]) -> web.Response | None:
    bearer = headers.get("authorization", "").startswith("Bearer ")
    if headers.get("x-api-key") or bearer:
        return None
    return error_response(401, "authentication_error", "x-api-key header is required")


def error_response(
    status: int,
    error_type: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    error_code: str | None = None,
) -> web.Response:
    """The documented error body: ``type``, ``error`` (type, message, details) and the id."""
    ids = id_header()
    error: dict[str, Any] = {"type": error_type, "message": message}
    if error_code:
        error["details"] = {"error_code": error_code}
    body = {"type": "error", "error": error, "request_id": ids["request-id"]}
    return web.json_response(body, status=status, headers={**ids, **(headers or {})})
