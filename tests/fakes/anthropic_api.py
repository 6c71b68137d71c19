"""A fake Anthropic Messages API server for tests.

It is a real aiohttp server on 127.0.0.1 that the real ``anthropic.AsyncAnthropic``
client reaches through ``base_url``. The model's behaviour is scripted by a plain
function of the request (sync or async) that returns the next assistant reply, or a
fault to inject::

    def model(req: ModelRequest) -> Reply:
        if req.turn == 0:
            return Reply([tool_use("run_code", {"code": "print(1)"})])
        return Reply([text(f"got {req.tool_results()[0].text}")])

    async with FakeAnthropic(model) as api:
        api.fail_next(1, http_error(529))
        client = api.client()
        ...

The wire format, request validation and usage accounting (including prompt caching)
follow the real API closely enough to catch client bugs and to compare token costs.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import math
import re
import secrets
import string
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anthropic
from aiohttp import web

from tests.fakes.loopback import serve

__all__ = [
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
    "stream_error",
    "text",
    "thinking",
    "tool_use",
]

Block = dict[str, Any]

API_VERSIONS = ("2023-06-01", "2026-10-21")
MAX_CACHE_BREAKPOINTS = 4
CACHE_LOOKBACK_BLOCKS = 20
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SAMPLING_PARAMS = ("temperature", "top_p", "top_k")

_ERROR_TYPE_BY_STATUS = {
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
_STATUS_BY_ERROR_TYPE = {v: k for k, v in _ERROR_TYPE_BY_STATUS.items()}


# --------------------------------------------------------------------------- blocks


def _random_id(prefix: str) -> str:
    alphabet = string.ascii_letters + string.digits
    return prefix + "01" + "".join(secrets.choice(alphabet) for _ in range(22))


def text(s: str) -> Block:
    return {"type": "text", "text": s}


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> Block:
    return {"type": "tool_use", "id": id or _random_id("toolu_"), "name": name, "input": input}


def thinking(s: str, signature: str | None = None) -> Block:
    sig = signature or "sig_" + hashlib.sha256(s.encode()).hexdigest()[:32]
    return {"type": "thinking", "thinking": s, "signature": sig}


def _as_blocks(content: Any) -> list[Block]:
    """Message or system content as a list of blocks (a bare string is one text block)."""
    if isinstance(content, str):
        return [text(content)]
    return list(content) if isinstance(content, list) else []


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _tokens(s: str) -> int:
    return math.ceil(len(s) / 4)


def _cache_key_part(block: Block) -> Block:
    """A block as it counts for the cache key: markers and null fields do not matter."""
    return {k: v for k, v in block.items() if k != "cache_control" and v is not None}


def _content_digest(content: Any) -> str:
    blocks = [_cache_key_part(b) for b in _as_blocks(content) if isinstance(b, dict)]
    return hashlib.sha256(_canonical(blocks).encode()).hexdigest()


# --------------------------------------------------------------------------- request


class ToolResult(dict[str, Any]):
    """A ``tool_result`` block, with helpers."""

    @property
    def tool_use_id(self) -> str:
        return self["tool_use_id"]

    @property
    def is_error(self) -> bool:
        return bool(self.get("is_error"))

    @property
    def text(self) -> str:
        content = self.get("content")
        if content is None:
            return ""
        return "\n".join(b.get("text", "") for b in _as_blocks(content) if b.get("type") == "text")


@dataclass
class ModelRequest:
    """One ``POST /v1/messages`` as received."""

    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def retry_count(self) -> int | None:
        """The SDK's ``x-stainless-retry-count`` (0 on a first attempt)."""
        value = self.headers.get("x-stainless-retry-count")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def system_text(self) -> str:
        blocks = _as_blocks(self.body.get("system", []))
        return "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")

    @property
    def tools(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools") or []]

    @property
    def last_user_blocks(self) -> list[Block]:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _as_blocks(message.get("content"))
        return []

    @property
    def turn(self) -> int:
        """Assistant turns already in the conversation."""
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    def tool_results(self) -> list[ToolResult]:
        return [ToolResult(b) for b in self.last_user_blocks if b.get("type") == "tool_result"]


# --------------------------------------------------------------------------- replies and faults


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
ModelFn = Callable[[ModelRequest], Reply | Fault | Awaitable[Reply | Fault]]


def _default_message(error_type: str) -> str:
    return {"overloaded_error": "Overloaded", "api_error": "Internal server error"}.get(
        error_type, error_type.replace("_", " ").capitalize()
    )


def http_error(
    status: int = 529,
    type: str | None = None,
    *,
    message: str | None = None,
    retry_after_ms: int | None = 1,
    should_retry: bool | None = None,
    error_code: str | None = None,
) -> HttpError:
    """A non-2xx JSON error response; ``type`` defaults from the status."""
    error_type = type or _ERROR_TYPE_BY_STATUS.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )
    return HttpError(
        status,
        error_type,
        message or _default_message(error_type),
        retry_after_ms,
        should_retry,
        error_code,
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
    return StreamError(type, message or _default_message(type), after_blocks, content)


def drop_connection(after_blocks: int = 0, *, content: list[Block] | None = None) -> DropConnection:
    """Close the TCP connection after N streamed blocks (before any response if not streaming)."""
    return DropConnection(after_blocks, content)


# --------------------------------------------------------------------------- validation


class InvalidRequest(Exception):
    """A 400 ``invalid_request_error``; the message names the problem."""


def _validate(body: Any, headers: dict[str, str], *, count_only: bool = False) -> None:
    if not isinstance(body, dict):
        raise InvalidRequest("Request body must be a JSON object")
    version = headers.get("anthropic-version")
    if version is None:
        raise InvalidRequest("anthropic-version: header is required")
    if version not in API_VERSIONS:
        raise InvalidRequest(f"anthropic-version: unknown version {version!r}")
    if "thread" in body:
        raise InvalidRequest(
            "thread: message threads are not supported here; send the full history "
            "on every request (tool runner: thread=False)"
        )
    required = ("model", "messages") if count_only else ("model", "max_tokens", "messages")
    for name in required:
        if name not in body:
            raise InvalidRequest(f"{name}: Field required")
    if not count_only and (not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1):
        raise InvalidRequest("max_tokens: must be a positive integer")
    if version == "2026-10-21":
        for name in SAMPLING_PARAMS:
            if name in body:
                raise InvalidRequest(f"{name}: is not supported under anthropic-version 2026-10-21")
    _validate_tools(body.get("tools"))
    _validate_system(body.get("system"))
    _validate_messages(body["messages"])
    _validate_tool_pairing(body["messages"])
    breakpoints = _count_cache_markers(body)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {breakpoints}."
        )


def _validate_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise InvalidRequest(
                f"tools.{i}.name: String should match pattern '{TOOL_NAME_RE.pattern}'"
            )
        if tool.get("type", "custom") == "custom" and not isinstance(
            tool.get("input_schema"), dict
        ):
            raise InvalidRequest(f"tools.{i}.custom.input_schema: Field required")
        if name in names:
            raise InvalidRequest(f"tools: Tool names must be unique ({name!r})")
        names.add(name)


def _validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise InvalidRequest("system: Input should be a valid string or list of text blocks")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidRequest(f"system.{i}: system blocks must be text blocks")


def _validate_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: at least one message is required")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise InvalidRequest("messages.0.role: the first message must use the 'user' role")
        if i > 0 and role == messages[i - 1]["role"]:
            raise InvalidRequest(
                f"messages.{i}: roles must alternate between 'user' and 'assistant', "
                f"but found two '{role}' messages in a row"
            )
        _validate_content(i, message.get("content"))


def _validate_content(i: int, content: Any) -> None:
    if isinstance(content, str):
        if not content:
            raise InvalidRequest(f"messages.{i}: text content must be non-empty")
        return
    if not isinstance(content, list) or not content:
        raise InvalidRequest(f"messages.{i}: all messages must have non-empty content")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or "type" not in block:
            raise InvalidRequest(f"messages.{i}.content.{j}: content blocks need a 'type'")
        if block["type"] == "text" and not block.get("text"):
            raise InvalidRequest(f"messages.{i}.content.{j}: text content blocks must be non-empty")
        if block["type"] == "thinking" and not block.get("signature"):
            raise InvalidRequest(f"messages.{i}.content.{j}.signature: Field required")


def _validate_tool_pairing(messages: list[dict[str, Any]]) -> None:
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        blocks = _as_blocks(message["content"])
        if message["role"] == "assistant":
            ids = [b.get("id") for b in blocks if b["type"] == "tool_use"]
            if seen_ids.intersection(ids) or len(set(ids)) != len(ids):
                raise InvalidRequest(f"messages.{i}: `tool_use` ids must be unique")
            seen_ids.update(ids)
            if ids and i + 1 < len(messages):
                _check_results(i + 1, _as_blocks(messages[i + 1]["content"]), ids)
        elif i == 0 or not any(
            b["type"] == "tool_use" for b in _as_blocks(messages[i - 1]["content"])
        ):
            _check_results(i, blocks, [])


def _check_results(i: int, blocks: list[Block], tool_use_ids: list[Any]) -> None:
    """The user message at ``i`` must answer exactly ``tool_use_ids``, results first."""
    result_ids = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
    if missing := [t for t in tool_use_ids if t not in result_ids]:
        raise InvalidRequest(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(map(str, missing))}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )
    if unexpected := [r for r in result_ids if r not in tool_use_ids]:
        raise InvalidRequest(
            f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(map(str, unexpected))}. Each `tool_result` block must have a "
            "corresponding `tool_use` block in the previous message."
        )
    kinds = [b["type"] == "tool_result" for b in blocks]
    if any(kinds) and kinds != sorted(kinds, reverse=True):
        raise InvalidRequest(
            f"messages.{i}: `tool_result` blocks must come first in the message, "
            "before any other content"
        )


def _count_cache_markers(body: dict[str, Any]) -> int:
    blocks = [*(body.get("tools") or []), *_as_blocks(body.get("system", []))]
    for message in body["messages"]:
        blocks.extend(_as_blocks(message["content"]))
    marked = sum(1 for b in blocks if isinstance(b, dict) and b.get("cache_control"))
    return marked + (1 if body.get("cache_control") else 0)


# --------------------------------------------------------------------------- prompt caching


@dataclass(frozen=True)
class _Segment:
    """One cacheable block of the prompt, with the hash of the prefix it ends."""

    digest: str
    end_tokens: int  # cumulative prompt tokens up to and including this block
    cache_control: dict[str, Any] | None


def _segments(body: dict[str, Any]) -> list[_Segment]:
    """The prompt in cache order (tools, system, messages), one segment per block."""
    running = hashlib.sha256(_canonical({"model": body.get("model")}).encode())
    total = 0
    out: list[_Segment] = []

    def add(kind: str, block: Block) -> None:
        nonlocal total
        part = _cache_key_part(block)
        running.update(_canonical({kind: part}).encode())
        total += _tokens(_canonical(part))
        out.append(_Segment(running.hexdigest(), total, block.get("cache_control")))

    for tool in body.get("tools") or []:
        add("tool", tool)
    for block in _as_blocks(body.get("system", [])):
        add("system", block)
    # tool_choice and thinking settings invalidate the message part of the cache only
    running.update(_canonical([body.get("tool_choice"), body.get("thinking")]).encode())
    for message in body.get("messages", []):
        for block in _as_blocks(message.get("content")):
            add(message.get("role", ""), block)
    return out


def _breakpoints(body: dict[str, Any], segments: list[_Segment]) -> list[tuple[int, str]]:
    """(segment index, ttl) of every cache breakpoint, in prompt order."""
    points = {i: s.cache_control for i, s in enumerate(segments) if s.cache_control}
    if body.get("cache_control") and segments:
        points.setdefault(len(segments) - 1, body["cache_control"])
    return [(i, cc.get("ttl", "5m")) for i, cc in sorted(points.items())]


class PromptCache:
    """Deterministic prompt-cache bookkeeping: prefix hash → prefix token count.

    Entries never expire; call ``clear()`` to simulate expiry.
    """

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self.entries: dict[str, int] = {}

    def clear(self) -> None:
        self.entries.clear()

    def input_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        segments = _segments(body)
        total = segments[-1].end_tokens if segments else 0
        breakpoints = _breakpoints(body, segments)
        hit = self._furthest_hit(segments, breakpoints)
        read = segments[hit].end_tokens if hit >= 0 else 0
        written = {"5m": 0, "1h": 0}
        covered = read
        for index, ttl in breakpoints:
            seg = segments[index]
            if index <= hit or seg.end_tokens < self.min_tokens:
                continue
            self.entries[seg.digest] = seg.end_tokens
            written[ttl if ttl in written else "5m"] += seg.end_tokens - covered
            covered = seg.end_tokens
        creation = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _furthest_hit(self, segments: list[_Segment], breakpoints: list[tuple[int, str]]) -> int:
        """Index of the longest cached prefix within the lookback window of any breakpoint."""
        best = -1
        for index, _ in breakpoints:
            for i in range(index, max(index - CACHE_LOOKBACK_BLOCKS, -1), -1):
                if segments[i].digest in self.entries:
                    best = max(best, i)
                    break
        return best


def _total_input_tokens(body: dict[str, Any]) -> int:
    segments = _segments(body)
    return segments[-1].end_tokens if segments else 0


def _block_payload(block: Block) -> str:
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind == "thinking":
        return block.get("thinking", "")
    if kind in ("tool_use", "server_tool_use"):
        return block.get("name", "") + _canonical(block.get("input", {}))
    return _canonical(block)


def _output_usage(content: list[Block]) -> dict[str, Any]:
    thinking_tokens = sum(_tokens(b["thinking"]) for b in content if b.get("type") == "thinking")
    total = sum(_tokens(_block_payload(b)) for b in content)
    return {
        "output_tokens": max(1, total),
        "output_tokens_details": {"thinking_tokens": thinking_tokens},
    }


# --------------------------------------------------------------------------- SSE

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
)


def _sse(event: str, **fields: Any) -> bytes:
    """One SSE frame; the data's ``type`` repeats the event name."""
    return f"event: {event}\ndata: {json.dumps({'type': event, **fields})}\n\n".encode()


def _split(s: str, parts: int) -> list[str]:
    """``s`` in ``parts`` roughly equal non-empty pieces (fewer if ``s`` is short)."""
    parts = max(1, min(parts, len(s)))
    size = math.ceil(len(s) / parts) if s else 1
    return [s[i : i + size] for i in range(0, len(s), size)] or [s]


def _block_events(index: int, block: Block) -> Iterator[bytes]:
    kind = block.get("type")
    start: Block
    deltas: list[Block] = []
    if kind == "text":
        start = {**block, "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in _split(block["text"], 2)]
    elif kind in ("tool_use", "server_tool_use"):
        start = {**block, "input": {}}
        pieces = ["", *_split(json.dumps(block.get("input", {})), 3)]
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": t} for t in _split(block["thinking"], 2)]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:  # redacted_thinking, server tool results, ...: the whole block at start
        start = block
    yield _sse("content_block_start", index=index, content_block=start)
    for delta in deltas:
        yield _sse("content_block_delta", index=index, delta=delta)
    yield _sse("content_block_stop", index=index)


def _stream_head(message: dict[str, Any]) -> Iterator[bytes]:
    usage = {k: message["usage"][k] for k in START_USAGE_KEYS if k in message["usage"]}
    started = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    started.update(stop_details=None, usage={**usage, "output_tokens": 1})
    yield _sse("message_start", message=started)
    yield _sse("ping")


def _stream_blocks(message: dict[str, Any]) -> Iterator[bytes]:
    """``message_start`` and ``ping``, then every content block."""
    yield from _stream_head(message)
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block)


def _stream_tail(message: dict[str, Any]) -> Iterator[bytes]:
    usage = {k: message["usage"][k] for k in DELTA_USAGE_KEYS if k in message["usage"]}
    delta = {k: message[k] for k in ("stop_reason", "stop_sequence", "stop_details")}
    yield _sse("message_delta", delta=delta, usage=usage)
    yield _sse("message_stop")


def _partial_blocks(n: int, content: list[Block] | None) -> list[Block]:
    blocks = list(content) if content is not None else []
    blocks += [text(f"partial block {i}") for i in range(len(blocks), n)]
    return blocks[:n]


# --------------------------------------------------------------------------- server


class FakeAnthropic:
    """The fake API server; an async context manager."""

    def __init__(
        self,
        model_fn: ModelFn,
        *,
        model_id: str = "claude-sonnet-5-5",
        min_cache_tokens: int = 1024,
    ) -> None:
        self.model_fn = model_fn
        self.model_id = model_id
        self.cache = PromptCache(min_cache_tokens)
        self.requests: list[ModelRequest] = []
        self.script_errors: list[BaseException] = []
        self.base_url = ""
        self._faults: deque[Fault] = deque()
        self._signatures: dict[str, str] = {}  # thinking signature → thinking text
        self._paused: set[str] = set()  # content digests of pause_turn replies
        self._runner: web.AppRunner | None = None

    # -- lifecycle

    async def __aenter__(self) -> FakeAnthropic:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/v1/models/{model_id}", self._get_model)
        self._runner, self.base_url = await serve(app)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if exc is None and self.script_errors:
            raise self.script_errors[0]

    # -- test helpers

    def fail_next(self, n: int, fault: Fault) -> None:
        """Answer the next ``n`` message requests with ``fault`` instead of calling the script."""
        self._faults.extend([fault] * n)

    def client(self, **kw: Any) -> anthropic.AsyncAnthropic:
        kw.setdefault("api_key", "sk-ant-test")
        return anthropic.AsyncAnthropic(base_url=self.base_url, **kw)

    # -- routes

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        body = await self._read_json(request)
        req = ModelRequest(body if isinstance(body, dict) else {}, _lower(request.headers))
        self.requests.append(req)
        if (denied := _check_auth(req.headers)) is not None:
            return denied
        try:
            _validate(body, req.headers)
            self._validate_continuation(req)
        except InvalidRequest as err:
            return _error_response(400, "invalid_request_error", str(err))

        outcome = self._faults.popleft() if self._faults else await self._run_script(req)
        if isinstance(outcome, Reply):
            return await self._reply(request, req, outcome)
        return await self._fault(request, req, outcome)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        body = await self._read_json(request)
        headers = _lower(request.headers)
        if (denied := _check_auth(headers)) is not None:
            return denied
        try:
            _validate(body, headers, count_only=True)
        except InvalidRequest as err:
            return _error_response(400, "invalid_request_error", str(err))
        return web.json_response({"input_tokens": _total_input_tokens(body)}, headers=_id_header())

    async def _list_models(self, request: web.Request) -> web.Response:
        info = self._model_info()
        page = {"data": [info], "has_more": False, "first_id": info["id"], "last_id": info["id"]}
        return web.json_response(page, headers=_id_header())

    async def _get_model(self, request: web.Request) -> web.Response:
        if request.match_info["model_id"] != self.model_id:
            model_id = request.match_info["model_id"]
            return _error_response(404, "not_found_error", f"model: {model_id}")
        return web.json_response(self._model_info(), headers=_id_header())

    # -- helpers

    @staticmethod
    async def _read_json(request: web.Request) -> Any:
        try:
            return json.loads(await request.read())
        except ValueError:
            return None

    def _model_info(self) -> dict[str, Any]:
        return {
            "type": "model",
            "id": self.model_id,
            "display_name": self.model_id.replace("-", " ").title(),
            "created_at": "2026-01-01T00:00:00Z",
            "lifecycle": "active",
            "max_input_tokens": 1_000_000,
            "max_tokens": 128_000,
        }

    def _validate_continuation(self, req: ModelRequest) -> None:
        """Thinking blocks come back unmodified; a final assistant turn only after pause_turn."""
        for i, message in enumerate(req.messages):
            if message["role"] != "assistant":
                continue
            for j, block in enumerate(_as_blocks(message["content"])):
                if block["type"] != "thinking":
                    continue
                original = self._signatures.get(block["signature"])
                if original is not None and original != block.get("thinking"):
                    raise InvalidRequest(
                        f"messages.{i}.content.{j}: `thinking` or `redacted_thinking` blocks "
                        "cannot be modified. These blocks must remain as they were in the "
                        "original response."
                    )
        last = req.messages[-1]
        if last["role"] == "assistant" and _content_digest(last["content"]) not in self._paused:
            raise InvalidRequest(
                "This model does not support assistant message prefill. "
                "The conversation must end with a user message."
            )

    async def _run_script(self, req: ModelRequest) -> Reply | Fault:
        try:
            outcome = self.model_fn(req)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            if not isinstance(outcome, Reply | HttpError | StreamError | DropConnection):
                raise TypeError(f"model_fn returned {outcome!r}, expected a Reply or a fault")
            return outcome
        except Exception as err:  # surfaced again when the server exits
            self.script_errors.append(err)
            return http_error(500, message=f"model_fn raised {err!r}", should_retry=False)

    def _message(self, req: ModelRequest, reply: Reply) -> dict[str, Any]:
        usage = {
            **self.cache.input_usage(req.body),
            **_output_usage(reply.content),
            "service_tier": "standard",
            **(reply.usage or {}),
        }
        return {
            "id": _random_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": req.model,
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": reply.stop_sequence,
            "stop_details": reply.stop_details,
            "usage": usage,
        }

    def _remember(self, req: ModelRequest, reply: Reply) -> None:
        for block in reply.content:
            if block.get("type") == "thinking":
                self._signatures[block["signature"]] = block["thinking"]
        if reply.stop_reason == "pause_turn":
            # Consecutive assistant turns are merged, so a turn paused again may come back as
            # one message: the earlier paused content followed by this reply's.
            last = req.messages[-1]
            before = last["content"] if last["role"] == "assistant" else []
            self._paused.add(_content_digest(reply.content))
            self._paused.add(_content_digest([*before, *reply.content]))

    async def _reply(
        self, request: web.Request, req: ModelRequest, reply: Reply
    ) -> web.StreamResponse:
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        message = self._message(req, reply)
        self._remember(req, reply)
        if not req.stream:
            return web.json_response(message, headers=_id_header())
        response = await _stream(request, [*_stream_blocks(message), *_stream_tail(message)])
        await response.write_eof()
        return response

    async def _fault(
        self, request: web.Request, req: ModelRequest, fault: Fault
    ) -> web.StreamResponse:
        if isinstance(fault, HttpError):
            return _http_error_response(fault)
        if isinstance(fault, StreamError) and not req.stream:
            status = _STATUS_BY_ERROR_TYPE.get(fault.type, 500)
            return _error_response(status, fault.type, fault.message)
        if isinstance(fault, DropConnection) and not req.stream:
            return _drop(request)

        message = self._message(req, Reply(_partial_blocks(fault.after_blocks, fault.content)))
        response = await _stream(request, _stream_blocks(message))
        if isinstance(fault, DropConnection):
            return _drop(request, response)
        await response.write(_sse("error", error={"type": fault.type, "message": fault.message}))
        await response.write_eof()
        return response


# --------------------------------------------------------------------------- responses


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _id_header() -> dict[str, str]:
    return {"request-id": _random_id("req_")}


def _check_auth(headers: dict[str, str]) -> web.Response | None:
    bearer = headers.get("authorization", "").startswith("Bearer ")
    if headers.get("x-api-key") or bearer:
        return None
    return _error_response(401, "authentication_error", "x-api-key header is required")


def _error_response(
    status: int,
    error_type: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    error_code: str | None = None,
) -> web.Response:
    id_header = _id_header()
    error: dict[str, Any] = {"type": error_type, "message": message}
    if error_code:
        error["details"] = {"error_code": error_code}
    body = {"type": "error", "error": error, "request_id": id_header["request-id"]}
    return web.json_response(body, status=status, headers={**id_header, **(headers or {})})


def _http_error_response(fault: HttpError) -> web.Response:
    headers = {}
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    if fault.should_retry is not None:
        headers["x-should-retry"] = "true" if fault.should_retry else "false"
    return _error_response(
        fault.status, fault.type, fault.message, headers=headers, error_code=fault.error_code
    )


async def _stream(request: web.Request, chunks: Iterable[bytes]) -> web.StreamResponse:
    """Start an SSE response and write ``chunks``, one write per event."""
    response = web.StreamResponse(
        headers={"content-type": "text/event-stream", "cache-control": "no-cache", **_id_header()}
    )
    await response.prepare(request)
    for chunk in chunks:
        await response.write(chunk)
    return response


def _drop(request: web.Request, response: web.StreamResponse | None = None) -> web.StreamResponse:
    """Close the connection abruptly; whatever was written so far has been flushed."""
    assert request.transport is not None
    request.transport.close()
    return response if response is not None else web.StreamResponse()
