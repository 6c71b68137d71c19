"""The model client: built once, plus turn-level retries and user-safe error messages."""

from __future__ import annotations

import asyncio
import random
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp
import anthropic
import httpx2
from anthropic._vendor.httpx_aiohttp import AiohttpTransport
from anthropic.types import Message
from anthropic.types.beta import BetaMessage

from bot.errors import BotError, ConfigError
from bot.settings import Settings

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
# The SDK sleeps through any `retry-after` it is given, minutes included; past this, the
# answer is handed to the turn retry below, which can tell the user instead.
SDK_LONGEST_WAIT_S = 10.0


class ModelError(BotError):
    """The model API failed in a way retrying did not fix."""


class PromptTooLong(ModelError):
    """The prompt is longer than the model's context window: compacting the conversation
    may fix it."""


# The SDK's TCP keepalive, which it sets only on a transport of its own making: a turn
# answered whole is silent on the wire until it is done, minutes for a long one, and some
# networks drop a connection idle that long.
KEEPALIVE = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    *((socket.IPPROTO_TCP, option, value) for option, value in (
        (getattr(socket, "TCP_KEEPIDLE", None), 60),
        (getattr(socket, "TCP_KEEPINTVL", None), 60),
        (getattr(socket, "TCP_KEEPCNT", None), 5),
    ) if option is not None),
]  # fmt: skip


def build_client(settings: Settings) -> anthropic.AsyncAnthropic:
    key = settings.anthropic_api_key
    if key is None and settings.anthropic_base_url is None:
        raise ConfigError(
            "Configuration error: ANTHROPIC_API_KEY is not set. Set it in the environment or "
            "in .env (or set ANTHROPIC_BASE_URL for a local Messages-API server)."
        )
    return anthropic.AsyncAnthropic(
        # A local server usually needs no key, but the SDK insists on one.
        api_key=key.get_secret_value() if key else "no-key",
        base_url=settings.anthropic_base_url,
        max_retries=settings.anthropic_max_retries,
        http_client=anthropic.DefaultAioHttpClient(
            transport=ModelTransport(limits=anthropic.DEFAULT_CONNECTION_LIMITS)
        ),
    )


class ModelTransport(AiohttpTransport):
    """The SDK's aiohttp transport (its `aiohttp` extra), which costs the event loop about
    half the CPU per turn of its default httpx one with hundreds of turns in flight: httpx's
    pool walks every connection it holds on each request (`bench.model_turn_cpu`). On top:
    the SDK's TCP keepalive, and an answer that asks for a long wait marked as not to be
    retried by the SDK (its own `x-should-retry` header), so no SDK retry sleeps for
    minutes unseen."""

    def get_client(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self.limits.max_connections or 0,
            keepalive_timeout=self.limits.keepalive_expiry,
            ssl=self.ssl_context,
            socket_factory=keepalive_socket,
        )
        return aiohttp.ClientSession(connector=connector)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        wait = _header_wait(response.headers)
        if wait is not None and wait > SDK_LONGEST_WAIT_S:
            response.headers["x-should-retry"] = "false"
        return response


def keepalive_socket(address: tuple[Any, ...]) -> socket.socket:
    """A socket for the model API, with the SDK's TCP keepalive set."""
    family, kind, proto = address[:3]
    sock = socket.socket(family=family, type=kind, proto=proto)
    for option in KEEPALIVE:
        sock.setsockopt(*option)
    return sock


@dataclass(frozen=True)
class RetryPolicy:
    """Retries around a whole turn, on top of the SDK's retries of the first response: an
    error event inside a 200 stream or a dropped stream is never retried by the SDK.
    `max_delay_s` is also the longest wait a server may ask for: a longer one ends the run
    with a message saying when to try again, rather than leaving it silent for minutes."""

    attempts: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 20.0

    def delay(self, attempt: int) -> float:
        ceiling = float(min(self.base_delay_s * 2**attempt, self.max_delay_s))
        return ceiling * random.uniform(0.75, 1.0)


async def create_message(
    client: anthropic.AsyncAnthropic, params: dict[str, Any], policy: RetryPolicy
) -> Message | BetaMessage:
    """One model turn; a failed one (a partial stream included) is sent again. With `betas`
    among the params, the beta endpoint takes it (context management)."""
    for attempt in range(policy.attempts):
        try:
            return await _turn(client, params)
        except (anthropic.APIError, httpx2.TransportError) as exc:
            # A stream cut mid-way surfaces as the transport's own error, not an SDK one.
            if attempt + 1 >= policy.attempts or not _retryable(exc):
                error = PromptTooLong if _too_long(exc) else ModelError
                raise error(_describe(exc, client)) from exc
            # Sooner than the server asked would only meet the same answer.
            asked = _retry_after(exc) or 0.0
            if asked > policy.max_delay_s:
                raise ModelError(_wait_asked(exc, asked)) from exc
        await asyncio.sleep(max(policy.delay(attempt), asked))
    raise AssertionError("unreachable")


async def _turn(client: anthropic.AsyncAnthropic, params: dict[str, Any]) -> Message | BetaMessage:
    """The turn as one JSON answer, unless the SDK says a turn of this `max_tokens` may take
    over 10 minutes and must stream. The bot uses only the whole message, and a stream costs
    the bot's CPU per event: the SDK parses and accumulates each delta of a few tokens, five
    times a whole answer's cost (`bench.model_turn_cpu`)."""
    messages = client.beta.messages if "betas" in params else client.messages
    try:
        message = await messages.create(**params)
        assert isinstance(message, Message | BetaMessage)  # not a stream: none was asked for
        return message
    except ValueError as exc:  # raised before anything is sent
        if "Streaming is required" not in str(exc):
            raise
    async with messages.stream(**params) as stream:
        return await stream.get_final_message()


def _retry_after(exc: Exception) -> float | None:
    """The wait a 429 or 529 asks for."""
    if not isinstance(exc, anthropic.APIStatusError):
        return None
    return _header_wait(exc.response.headers)


def _header_wait(headers: httpx2.Headers) -> float | None:
    """Seconds, read as the SDK reads them: `retry-after-ms`, then `retry-after` in seconds
    (an HTTP date there is left to the SDK)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers[name]) * scale
        except (KeyError, ValueError):
            continue
    return None


def _wait_asked(exc: Exception, seconds: float) -> str:
    """The run's end when the API asks for a longer wait than a run should sit through."""
    minutes = round(seconds / 60)
    when = f"about {minutes} minutes" if minutes > 1 else f"{seconds:.0f} seconds"
    status = getattr(exc, "status_code", None)
    kind = _error_type(exc) if isinstance(exc, anthropic.APIStatusError) else None
    busy = "overloaded" if status == 529 or kind == "overloaded_error" else "rate-limiting us"
    return f"The model API is {busy} and asked us to wait {when}; try again after that."


def _too_long(exc: Exception) -> bool:
    """The prompt is over the window (a 413 is the request's bytes: a summary may not help)."""
    text = str(getattr(exc, "message", ""))
    return getattr(exc, "status_code", None) == 400 and "prompt is too long" in text


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return True
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code == 200:  # an `event: error` inside the stream
            return _error_type(exc) in RETRYABLE_STREAM_ERRORS
        return exc.status_code in RETRYABLE_STATUS
    return False


def _error_type(exc: anthropic.APIStatusError) -> str | None:
    kind = getattr(exc, "type", None)
    if kind:
        return str(kind)
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body)
    return error.get("type") if isinstance(error, dict) else None


def _describe(exc: Exception, client: anthropic.AsyncAnthropic) -> str:
    """A message a user can act on; never the raw response."""
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return f"Could not reach the model API at {client.base_url}; check ANTHROPIC_BASE_URL."
    status = getattr(exc, "status_code", None)
    kind = _error_type(exc) if isinstance(exc, anthropic.APIStatusError) else None
    if status == 401:
        return "The model API rejected the API key; check ANTHROPIC_API_KEY."
    if status == 403:
        return "The API key may not use this model or feature (permission denied)."
    if status == 404:
        return "The model API does not know this model; check ANTHROPIC_MODEL."
    if status == 429 or kind == "rate_limit_error":
        return "The model API is rate-limiting us; try again in a minute."
    if status == 529 or kind == "overloaded_error":
        return "The model API is overloaded right now; try again in a few minutes."
    if status == 413:
        return "This conversation is too large for the model API; start a new conversation."
    if status == 400 and "prompt is too long" in str(getattr(exc, "api_message", "")):
        return (
            "This conversation has grown too long for the model's context window; "
            "start a new conversation to go on."
        )
    if status == 400:
        detail = getattr(exc, "api_message", None) or "bad request"
        return f"The model API refused the request: {str(detail)[:200]}"
    return f"The model API failed (status {status}, {kind or 'unknown error'}); try again."
