"""A fake Anthropic Messages API server for tests.

It is a real aiohttp server on 127.0.0.1 that the real ``anthropic.AsyncAnthropic``
client reaches through ``base_url``. The model's behaviour is scripted by a plain
function of the request (sync or async) that returns the next assistant reply, or a
fault to inject::

    def model(req: ModelRequest) -> Reply:
        if req.turn == 0:
            return Reply([thinking("plan"), tool_use("run_code", {"code": "print(1)"})])
        return Reply([text(f"got {req.tool_results()[0].text}")])

    async with FakeAnthropic(model) as api:
        api.fail_next(1, http_error(529))
        client = api.client()
        ...

It is as strict as the Messages API reference (anthropic-messages-api.md) where
that doc is clear: request validation (``validation``), per-model rules
(``rules``), signed thinking blocks that must come back unchanged
(``history``; a model that thinks starts every reply with a thinking block, the
script's or one added here; the seal binds it to the model and the conversation), each
model's ``max_tokens`` cap and context window (``rules``; "prompt is too long: N
tokens > M maximum" is an assumed wording, the doc gives none), and a prompt cache that
matches prefixes byte for byte and forgets them after their TTL (``cache``).
Faults include 429/529s with no ``retry-after`` or a long one (``http_error``). A test
fails when its script raises, or when faults it injected were never consumed.

Server-side context management (doc 6) follows ``context_editing``: "apply" runs the beta
edits named in ``anthropic-beta`` (``context`` checks them): the oldest tool results
cleared to a placeholder past a trigger (``clearing``), and compaction
(``compaction``): a prompt past its trigger is summarised by ``compaction_fn`` into
a signed compaction block that opens the reply (its tokens in ``usage.iterations``), and a
request is read from its last compaction block on. The edited prompt is what the window,
the cache and the script (``req.messages``) see; thinking seals are checked on the messages
as sent (``req.sent_messages``). "refuse" is a server without the beta (a 400 on the field);
"ignore" a compatible one that drops it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

import anthropic
from aiohttp import web

from tests.fakes.anthropic.blocks import Block, redacted_thinking, text, thinking, tool_use
from tests.fakes.anthropic.cache import PromptCache, total_input_tokens
from tests.fakes.anthropic.compaction import CompactionFn, compacted, digest
from tests.fakes.anthropic.editing import ContextEditor, Edited
from tests.fakes.anthropic.faults import (
    DropConnection,
    Fault,
    HttpError,
    ModelFn,
    Reply,
    StreamError,
    as_http_error,
    drop_connection,
    http_error,
    stream_error,
    summary,
)
from tests.fakes.anthropic.history import PROCESS_SECRET, History
from tests.fakes.anthropic.models import KNOWN_MODELS, context_window, model_info
from tests.fakes.anthropic.reply import Compaction, reply_blocks, with_thought
from tests.fakes.anthropic.reply import message as build_message
from tests.fakes.anthropic.request import ModelRequest, ToolResult
from tests.fakes.anthropic.rules import (
    MAX_REQUEST_BYTES,
    check_cache_markers,
    check_max_tokens,
    check_model,
    check_model_rules,
    check_size,
    check_window,
)
from tests.fakes.anthropic.validation import ApiError, validate
from tests.fakes.anthropic.wire import (
    check_auth,
    drop,
    error_response,
    id_header,
    lower,
    partial_blocks,
    read_body,
    sse,
    stream,
    stream_blocks,
    stream_tail,
)
from tests.fakes.loopback import serve

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


class FakeAnthropic:
    """The fake API server; an async context manager.

    ``models`` are the model ids it knows (others get a 404); ``max_request_bytes`` is the
    size above which a request gets a 413; ``context_window``, when given, replaces every
    model's own (so a test can fill a small one). ``clock`` is the prompt cache's time in
    seconds (``time.monotonic`` unless a test drives it).

    The Models API (``GET /v1/models``, ``GET /v1/models/{id}``) answers with the fields the
    reference doc names (sections 4 and 6): ``id``, ``type: "model"``, ``display_name``,
    ``created_at``, ``max_input_tokens`` (the window, ``context_window`` when set) and
    ``max_tokens``; an unknown id gets a 404 ``not_found_error``. ``models_api=False`` leaves
    the routes out, so they answer aiohttp's plain 404 as a local compatible server would.

    ``context_editing`` is "apply", "refuse" or "ignore" (module docstring);
    ``compaction_fn`` makes a compaction's summary from the messages the model would read
    (by default each user and assistant text, clipped). ``delta_chars`` streams text and
    tool input in deltas of that many characters, as finely as the real API does (by
    default each block comes in two or three)."""

    def __init__(
        self,
        model_fn: ModelFn,
        *,
        models: Iterable[str] = KNOWN_MODELS,
        min_cache_tokens: int = 1024,
        max_request_bytes: int = MAX_REQUEST_BYTES,
        secret: bytes = PROCESS_SECRET,
        context_window: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        models_api: bool = True,
        context_editing: str = "apply",
        compaction_fn: CompactionFn = digest,
        delta_chars: int | None = None,
    ) -> None:
        self.model_fn = model_fn
        self.delta_chars = delta_chars  # None: two or three deltas a block
        self.models_api = models_api
        self.model_lookups: list[str] = []  # the ids GET /v1/models/{id} was asked about
        self.models = tuple(models)
        self.max_request_bytes = max_request_bytes
        self.context_window = context_window
        self.cache = PromptCache(min_cache_tokens, clock)
        self.requests: list[ModelRequest] = []
        self.replies: list[dict[str, Any]] = []  # every message sent, as sent
        self.errors: list[Exception] = []  # raised by the script or the fake itself
        self.base_url = ""
        self._faults: deque[Fault] = deque()
        self._history = History(secret)
        self._context = ContextEditor(context_editing, secret, compaction_fn)
        self._runner: web.AppRunner | None = None

    # -- lifecycle

    async def __aenter__(self) -> FakeAnthropic:
        # aiohttp's own limit (1 MiB by default) would answer a bigger body before we can.
        app = web.Application(client_max_size=self.max_request_bytes + 8 * 2**20)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        if self.models_api:
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
        # The client only saw a 500: the script's own error is what the test must report.
        if self.errors:
            raise self.errors[0]
        if exc is None and self._faults:
            raise AssertionError(f"injected faults never met a request: {summary(self._faults)}")

    # -- test helpers

    def fail_next(self, n: int, fault: Fault) -> None:
        """Answer the next ``n`` valid message requests with ``fault`` instead of calling the
        script. Leaving the server with some of them unused fails the test."""
        self._faults.extend([fault] * n)

    def pending_faults(self) -> list[Fault]:
        """Injected faults no request has met yet."""
        return list(self._faults)

    def client(self, **kw: Any) -> anthropic.AsyncAnthropic:
        kw.setdefault("api_key", "sk-ant-test")
        return anthropic.AsyncAnthropic(base_url=self.base_url, **kw)

    # -- routes

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._create(request)
        except ConnectionError:  # the client went away mid-answer (a cancelled run): no fault
            raise
        except Exception as err:  # a script's assertion, or a bug here: fail the test
            self.errors.append(err)
            fault = http_error(500, message=f"fake server error: {err!r}", should_retry=False)
            return self._error(fault)

    async def _create(self, request: web.Request) -> web.StreamResponse:
        raw, body = await read_body(request)
        req = ModelRequest(body if isinstance(body, dict) else {}, lower(request.headers))
        self.requests.append(req)
        if (denied := check_auth(req.headers)) is not None:
            return denied
        try:
            edited = self._check(raw, body, req.headers)
            self._history.check(str(req.model), req.merged_sent)
        except ApiError as err:
            return error_response(err.status, err.type, str(err))
        req.view, req.applied_edits = edited.view, edited.applied
        made = None if self._faults else self._context.compaction(edited.compact, req.model_body)
        if made is not None:
            return await self._compacted(request, req, edited, *made)
        outcome = self._faults.popleft() if self._faults else await self._run_script(req)
        if isinstance(outcome, Reply):
            return await self._reply(request, req, outcome)
        return await self._fault(request, req, outcome)

    async def _compacted(
        self, request: web.Request, req: ModelRequest, edited: Edited, block: Block, size: int
    ) -> web.StreamResponse:
        """The prompt passed the compact trigger: the model answers the summary and the latest
        user message, unless the edit asks to pause after compacting."""
        req.compaction, req.view = block["content"], compacted(req.messages, block)
        if (edited.compact or {}).get("pause_after_compaction"):
            return await self._reply(request, req, Reply([], "compaction"), (block, size))
        outcome = await self._run_script(req)
        if isinstance(outcome, Reply):
            return await self._reply(request, req, outcome, (block, size))
        return await self._fault(request, req, outcome)

    async def _count_tokens(self, request: web.Request) -> web.Response:
        raw, body = await read_body(request)
        headers = lower(request.headers)
        if (denied := check_auth(headers)) is not None:
            return denied
        try:
            edited = self._check(raw, body, headers, count_only=True)
        except ApiError as err:
            return error_response(err.status, err.type, str(err))
        answer: dict[str, Any] = {"input_tokens": total_input_tokens(edited.body(body))}
        if edited.applied is not None:
            answer["context_management"] = {"original_input_tokens": total_input_tokens(body)}
        return web.json_response(answer, headers=id_header())

    async def _list_models(self, request: web.Request) -> web.Response:
        data = [model_info(m, self.context_window) for m in self.models]
        page = {"data": data, "has_more": False, "first_id": None, "last_id": None}
        if data:
            page.update(first_id=data[0]["id"], last_id=data[-1]["id"])
        return web.json_response(page, headers=id_header())

    async def _get_model(self, request: web.Request) -> web.Response:
        model = request.match_info["model_id"]
        self.model_lookups.append(model)
        if model not in self.models:
            return error_response(404, "not_found_error", f"model: {model}")
        return web.json_response(model_info(model, self.context_window), headers=id_header())

    # -- helpers

    def _check(
        self, raw: bytes | None, body: Any, headers: dict[str, str], *, count_only: bool = False
    ) -> Edited:
        """Everything the API checks before the model runs, in the order it answers. The
        window holds the prompt after context edits, which is what the model reads."""
        check_size(len(raw) if raw is not None else None, self.max_request_bytes)
        validate(body, headers, count_only=count_only)
        check_model(body, self.models)
        check_model_rules(body)
        check_cache_markers(body)
        edited = self._context.edit(body, headers)
        if not count_only:  # counting a prompt too long to send is what counting is for
            check_max_tokens(body)
            window = self.context_window or context_window(str(body.get("model")))
            check_window(total_input_tokens(edited.body(body)), window)
        return edited

    async def _run_script(self, req: ModelRequest) -> Reply | Fault:
        outcome = self.model_fn(req)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if not isinstance(outcome, Reply | HttpError | StreamError | DropConnection):
            raise TypeError(f"model_fn returned {outcome!r}, expected a Reply or a fault")
        return outcome

    async def _reply(
        self,
        request: web.Request,
        req: ModelRequest,
        reply: Reply,
        compaction: Compaction | None = None,
    ) -> web.StreamResponse:
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        blocks = reply_blocks(req, reply, compaction)
        content = self._history.sign(str(req.model), req.merged_sent, blocks)
        message = build_message(self.cache, req, reply, content, compaction)
        stop = str(reply.stop_reason)
        self._history.remember(str(req.model), req.merged_sent, message["content"], stop)
        self.replies.append(message)
        if not req.stream:
            return web.json_response(message, headers=id_header())
        events = [*stream_blocks(message, self.delta_chars), *stream_tail(message)]
        response = await stream(request, events)
        await response.write_eof()
        return response

    async def _fault(
        self, request: web.Request, req: ModelRequest, fault: Fault
    ) -> web.StreamResponse:
        if isinstance(fault, HttpError):
            return self._error(fault)
        if isinstance(fault, StreamError) and not req.stream:
            return self._error(as_http_error(fault))
        if isinstance(fault, DropConnection) and not req.stream:
            return drop(request)

        blocks = with_thought(req, partial_blocks(fault.after_blocks, fault.content))
        partial = self._history.sign(str(req.model), req.merged_sent, blocks)
        started = build_message(self.cache, req, Reply(partial), partial)
        response = await stream(request, stream_blocks(started))
        if isinstance(fault, DropConnection):
            return drop(request, response)
        await response.write(sse("error", error={"type": fault.type, "message": fault.message}))
        await response.write_eof()
        return response

    @staticmethod
    def _error(fault: HttpError) -> web.Response:
        return error_response(
            fault.status,
            fault.type,
            fault.message,
            headers=fault.headers(),
            error_code=fault.error_code,
        )
