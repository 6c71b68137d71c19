"""Faults the fake injects, and how the real SDK meets them."""

from __future__ import annotations

import asyncio
import time

import anthropic
import httpx2
import pytest

from tests.anthropic_support import MODEL, USER_HI, raw_post, say
from tests.fakes.anthropic import (
    FakeAnthropic,
    HttpError,
    ModelRequest,
    Reply,
    StreamError,
    drop_connection,
    http_error,
    stream_error,
    text,
)


async def test_overloaded_twice_then_success_is_retried_by_sdk() -> None:
    async with FakeAnthropic(say("finally")) as api, api.client(max_retries=2) as client:
        api.fail_next(2, http_error(529, retry_after_ms=1))
        started = time.monotonic()
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        elapsed = time.monotonic() - started

    assert msg.content[-1].text == "finally"
    assert [r.retry_count for r in api.requests] == [0, 1, 2]
    assert elapsed < 1.0


async def test_should_retry_false_stops_after_one_attempt() -> None:
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=2) as client:
        api.fail_next(1, http_error(500, should_retry=False))
        with pytest.raises(anthropic.InternalServerError) as info:
            await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert type(info.value) is anthropic.InternalServerError
    assert info.value.status_code == 500 and info.value.type == "api_error"
    assert info.value.request_id and info.value.request_id.startswith("req_")
    assert len(api.requests) == 1


async def test_overloaded_exhausts_retries_as_overloaded_error() -> None:
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=1) as client:
        api.fail_next(2, http_error(529))
        with pytest.raises(anthropic.OverloadedError):
            await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert [r.retry_count for r in api.requests] == [0, 1]


async def test_error_event_mid_stream_raises_plain_status_error() -> None:
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=2) as client:
        api.fail_next(1, stream_error("overloaded_error", after_blocks=1))
        received: list[str] = []
        with pytest.raises(anthropic.APIStatusError) as info:
            async with client.messages.stream(model=MODEL, max_tokens=10, messages=USER_HI) as s:
                async for event in s:
                    received.append(event.type)

    err = info.value
    assert type(err) is anthropic.APIStatusError  # not OverloadedError
    assert err.status_code == 200 and err.type == "overloaded_error"
    assert "content_block_stop" in received  # the first block arrived before the error
    assert len(api.requests) == 1  # an error after the stream started is not retried


async def test_stream_error_on_non_streaming_request_is_an_http_error() -> None:
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=0) as client:
        api.fail_next(1, stream_error("overloaded_error"))
        with pytest.raises(anthropic.OverloadedError):
            await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)


async def test_dropped_connection_mid_stream_raises_a_connection_error() -> None:
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=2) as client:
        api.fail_next(1, drop_connection(after_blocks=1))
        with pytest.raises((httpx2.TransportError, anthropic.APIConnectionError)) as info:
            async with client.messages.stream(model=MODEL, max_tokens=10, messages=USER_HI) as s:
                await s.get_final_message()

    # Before SDK 2.17 a cut stream body raised the raw transport error; from 2.17 it is
    # an APIConnectionError caused by it. The model client handles both the same way.
    err = info.value
    cause = err if isinstance(err, httpx2.TransportError) else err.__cause__
    assert isinstance(cause, httpx2.RemoteProtocolError)
    assert len(api.requests) == 1  # a cut after the stream started is not retried


async def test_dropped_connection_before_response_is_retried_by_sdk() -> None:
    async with FakeAnthropic(say("recovered")) as api, api.client(max_retries=2) as client:
        api.fail_next(1, drop_connection())
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert msg.content[-1].text == "recovered"
    assert [r.retry_count for r in api.requests] == [0, 1]


async def test_script_can_return_faults_and_be_async() -> None:
    async def model(req: ModelRequest) -> Reply | HttpError:
        if req.retry_count == 0:
            return http_error(429, retry_after_ms=1)
        return Reply([text("ok")], delay_s=0.01)

    async with FakeAnthropic(model) as api, api.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert msg.content[-1].text == "ok"
    assert [r.retry_count for r in api.requests] == [0, 1]


async def test_script_exception_is_raised_when_server_exits() -> None:
    def model(req: ModelRequest) -> Reply:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        async with FakeAnthropic(model) as api, api.client() as client:
            with pytest.raises(anthropic.InternalServerError):
                await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
            assert len(api.requests) == 1


@pytest.mark.parametrize(
    ("fault", "status", "retry_after"),
    [
        (http_error(429), 429, "1"),
        (http_error(529), 529, "1"),
        (http_error(429, retry_after_ms=2500), 429, "3"),  # whole seconds, rounded up
        (stream_error("overloaded_error"), 529, "1"),  # asked for without streaming
        (http_error(429, retry_after_ms=None), 429, None),  # a monthly spend cap: no retry
        (http_error(400), 400, None),
    ],
)
async def test_rate_limits_and_overload_carry_retry_after(
    fault: HttpError | StreamError, status: int, retry_after: str | None
) -> None:
    async with FakeAnthropic(say("unused")) as api:
        api.fail_next(1, fault)
        got, payload, headers = await raw_post(
            api, {"model": MODEL, "max_tokens": 10, "messages": USER_HI}
        )
    assert got == status and payload["type"] == "error"
    assert headers.get("retry-after") == retry_after


async def test_the_sdk_waits_as_long_as_retry_after_asks() -> None:
    async with FakeAnthropic(say("ok")) as api, api.client(max_retries=1) as client:
        api.fail_next(1, http_error(429, retry_after_ms=300))
        await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
    first, second = api.requests
    assert second.received_at - first.received_at >= 0.3


async def test_faults_never_consumed_fail_the_test() -> None:
    with pytest.raises(AssertionError, match=r"never met a request: 1 × HttpError\(529\)"):
        async with FakeAnthropic(say("ok")) as api, api.client(max_retries=0) as client:
            api.fail_next(2, http_error(529))
            with pytest.raises(anthropic.OverloadedError):
                await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
            assert api.pending_faults() == [http_error(529)]


async def test_a_refused_request_does_not_consume_a_fault() -> None:
    async with FakeAnthropic(say("ok")) as api, api.client(max_retries=0) as client:
        api.fail_next(1, http_error(529))
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.create(model=MODEL, max_tokens=0, messages=USER_HI)
        assert len(api.pending_faults()) == 1
        with pytest.raises(anthropic.OverloadedError):
            await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        assert api.pending_faults() == []


async def test_script_error_wins_over_the_error_it_caused() -> None:
    def model(req: ModelRequest) -> Reply:
        assert req.turn == 5, "the script expected another turn"
        return Reply([text("unreachable")])

    with pytest.raises(AssertionError, match="expected another turn") as info:
        async with FakeAnthropic(model) as api, api.client(max_retries=0) as client:
            # The client only sees a 500; code under test may turn it into its own error.
            try:
                await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
            except anthropic.InternalServerError as exc:
                raise RuntimeError("the bot gave up") from exc
    assert isinstance(info.value.__context__, RuntimeError)


async def test_script_returning_something_else_fails_the_test() -> None:
    with pytest.raises(TypeError, match="expected a Reply or a fault"):
        async with FakeAnthropic(lambda req: "hello") as api, api.client() as client:
            with pytest.raises(anthropic.InternalServerError) as info:
                await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
            assert info.value.type == "api_error"
            assert len(api.requests) == 1  # x-should-retry: false


async def test_a_client_that_walks_away_is_not_a_script_error() -> None:
    slow = Reply([text("too late")], delay_s=0.3)
    async with FakeAnthropic(lambda req: slow) as api, api.client(max_retries=0) as client:
        with pytest.raises(anthropic.APITimeoutError):
            async with client.messages.stream(
                model=MODEL, max_tokens=10, messages=USER_HI, timeout=0.1
            ) as s:
                await s.get_final_message()
        await asyncio.sleep(0.4)  # the answer is written to a closed connection
    assert api.errors == [] and len(api.replies) == 1


async def test_a_429_without_retry_after_and_one_asking_for_minutes() -> None:
    """Doc 1.7: a spend-cap 429 has no `retry-after`; the SDK then backs off by itself (2.3).
    A long ask comes as `retry-after` alone, in seconds (seen here outside the SDK, which
    would sit through it)."""
    async with FakeAnthropic(say("ok")) as api, api.client(max_retries=1) as client:
        api.fail_next(1, http_error(429, retry_after_ms=None))
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        api.fail_next(1, http_error(529, retry_after_s=120))
        body = {"model": MODEL, "max_tokens": 5, "messages": USER_HI}
        status, payload, headers = await raw_post(api, body)
    assert msg.content[-1].text == "ok"
    first, retried = api.requests[:2]
    assert retried.received_at - first.received_at >= 0.5 * 0.75  # the SDK's own backoff
    assert "retry-after" not in http_error(429, retry_after_ms=None).headers()
    assert status == 529 and payload["error"]["type"] == "overloaded_error"
    assert headers["retry-after"] == "120" and "retry-after-ms" not in headers
