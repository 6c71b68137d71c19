"""The fake Messages API server, exercised through the real ``anthropic.AsyncAnthropic``."""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
import anthropic
import httpx2
import pytest

from tests.fakes.anthropic_api import (
    FakeAnthropic,
    HttpError,
    ModelRequest,
    Reply,
    drop_connection,
    http_error,
    stream_error,
    text,
    thinking,
    tool_use,
)

MODEL = "claude-sonnet-5-5"
USER_HI = [{"role": "user", "content": "hi"}]
RUN_CODE = {
    "name": "run_code",
    "description": "Run Python code in the sandbox.",
    "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}},
}
# about 1,500 tokens: above the default 1,024-token caching minimum
LONG_SYSTEM = "You are a careful data analyst. Always show the code you ran. " * 100


def say(s: str) -> Any:
    return lambda req: Reply([text(s)])


async def raw_post(api: FakeAnthropic, body: Any, **headers: str) -> tuple[int, dict[str, Any]]:
    """A POST /v1/messages outside the SDK, to see exactly what the server answers."""
    hdrs = {"x-api-key": "k", "anthropic-version": "2023-06-01", **headers}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{api.base_url}/v1/messages?beta=true", json=body, headers=hdrs) as resp,
    ):
        return resp.status, await resp.json()


# --------------------------------------------------------------------------- happy paths


async def test_create_returns_scripted_text() -> None:
    async with FakeAnthropic(say("Hello from the fake")) as api, api.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=100, messages=USER_HI)

    assert msg.content[0].type == "text"
    assert msg.content[0].text == "Hello from the fake"
    assert msg.stop_reason == "end_turn"
    assert msg.model == MODEL
    assert msg._request_id and msg._request_id.startswith("req_")
    assert msg.usage.input_tokens > 0 and msg.usage.output_tokens == 5
    [req] = api.requests
    assert req.headers["authorization"] == "Bearer sk-ant-test"
    assert req.headers["anthropic-version"] == "2026-10-21"
    assert req.retry_count == 0 and req.messages == USER_HI and req.turn == 0


async def test_stream_rebuilds_tool_use_input_and_thinking() -> None:
    tool_input = {"code": 'import pandas as pd\nprint("héllo", {"a": [1, 2.5]})', "timeout": 30}
    call = tool_use("run_code", tool_input)
    scripted = [thinking("Let me compute that."), text("Running it now."), call]

    async with (
        FakeAnthropic(lambda req: Reply(scripted)) as api,
        api.client() as client,
        client.messages.stream(
            model=MODEL, max_tokens=1000, messages=USER_HI, tools=[RUN_CODE]
        ) as stream,
    ):
        events = [event.type async for event in stream]
        final = await stream.get_final_message()

    assert [b.model_dump(exclude_none=True) for b in final.content] == scripted
    assert final.content[0].signature == scripted[0]["signature"]
    assert final.stop_reason == "tool_use"
    assert final.usage.output_tokens > 1
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "input_json" in events and "thinking" in events and "signature" in events
    assert api.requests[0].headers["x-stainless-helper-method"] == "stream"


async def test_sse_wire_format() -> None:
    reply = Reply([text("Hello there"), tool_use("run_code", {"code": "1 + 1"}, id="toolu_1")])
    async with FakeAnthropic(lambda req: reply) as api, aiohttp.ClientSession() as http:
        body = {"model": MODEL, "max_tokens": 50, "messages": USER_HI, "stream": True}
        headers = {"authorization": "Bearer k", "anthropic-version": "2026-10-21"}
        async with http.post(f"{api.base_url}/v1/messages", json=body, headers=headers) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            assert resp.headers["request-id"].startswith("req_")
            raw = (await resp.read()).decode()

    frames = [f.split("\n") for f in raw.strip().split("\n\n")]
    events = [
        (lines[0].removeprefix("event: "), json.loads(lines[1].removeprefix("data: ")))
        for lines in frames
    ]
    assert all(name == data["type"] for name, data in events)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    text_deltas = [
        d["delta"]["text"] for n, d in events if n == "content_block_delta" and d["index"] == 0
    ]
    assert len(text_deltas) >= 2 and "".join(text_deltas) == "Hello there"
    json_parts = [
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["index"] == 1
    ]
    assert json_parts[0] == "" and len(json_parts) >= 3
    assert json.loads("".join(json_parts)) == {"code": "1 + 1"}
    delta = events[-2][1]
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 1


async def test_script_sees_tool_results_and_turns() -> None:
    def model(req: ModelRequest) -> Reply:
        if req.turn == 0:
            return Reply([tool_use("run_code", {"code": "print(6 * 7)"})])
        [result] = req.tool_results()
        return Reply([text(f"The answer is {result.text}")])

    async with FakeAnthropic(model) as api, api.client() as client:
        messages: list[Any] = [{"role": "user", "content": "what is 6*7?"}]
        first = await client.messages.create(
            model=MODEL, max_tokens=100, messages=messages, tools=[RUN_CODE], system="Be brief."
        )
        call = first.content[0]
        assert call.type == "tool_use" and call.id.startswith("toolu_")
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call.id,
                        "content": [{"type": "text", "text": "42"}],
                    }
                ],
            },
        ]
        second = await client.messages.create(
            model=MODEL, max_tokens=100, messages=messages, tools=[RUN_CODE], system="Be brief."
        )

    assert second.content[0].text == "The answer is 42"
    assert api.requests[1].tools == ["run_code"] and api.requests[1].system_text == "Be brief."


async def test_count_tokens_and_models() -> None:
    async with FakeAnthropic(say("-"), model_id=MODEL) as api, api.client() as client:
        counted = await client.messages.count_tokens(model=MODEL, messages=USER_HI)
        created = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        models = [m.id async for m in client.models.list()]

    assert counted.input_tokens == created.usage.input_tokens
    assert models == [MODEL]


# --------------------------------------------------------------------------- faults


async def test_overloaded_twice_then_success_is_retried_by_sdk() -> None:
    async with FakeAnthropic(say("finally")) as api, api.client(max_retries=2) as client:
        api.fail_next(2, http_error(529, retry_after_ms=1))
        started = time.monotonic()
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        elapsed = time.monotonic() - started

    assert msg.content[0].text == "finally"
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
        api.fail_next(5, http_error(529))
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


async def test_dropped_connection_mid_stream_raises_raw_transport_error() -> None:
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=2) as client:
        api.fail_next(1, drop_connection(after_blocks=1))
        with pytest.raises(httpx2.RemoteProtocolError) as info:
            async with client.messages.stream(model=MODEL, max_tokens=10, messages=USER_HI) as s:
                await s.get_final_message()

    # The SDK does not wrap errors raised while iterating a stream body.
    assert not isinstance(info.value, anthropic.APIError)
    assert isinstance(info.value, httpx2.TransportError)
    assert len(api.requests) == 1


async def test_dropped_connection_before_response_is_retried_by_sdk() -> None:
    async with FakeAnthropic(say("recovered")) as api, api.client(max_retries=2) as client:
        api.fail_next(1, drop_connection())
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert msg.content[0].text == "recovered"
    assert [r.retry_count for r in api.requests] == [0, 1]


async def test_script_can_return_faults_and_be_async() -> None:
    async def model(req: ModelRequest) -> Reply | HttpError:
        if req.retry_count == 0:
            return http_error(429, retry_after_ms=1)
        return Reply([text("ok")], delay_s=0.01)

    async with FakeAnthropic(model) as api, api.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert msg.content[0].text == "ok"
    assert [r.retry_count for r in api.requests] == [0, 1]


async def test_script_exception_is_raised_when_server_exits() -> None:
    def model(req: ModelRequest) -> Reply:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        async with FakeAnthropic(model) as api, api.client() as client:
            with pytest.raises(anthropic.InternalServerError):
                await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
            assert len(api.requests) == 1


# --------------------------------------------------------------------------- validation


async def test_unanswered_tool_use_is_rejected() -> None:
    history = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": [tool_use("run_code", {"code": "1"}, id="toolu_abc")]},
        {"role": "user", "content": "and?"},
    ]
    async with FakeAnthropic(say("unused")) as api, api.client() as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(model=MODEL, max_tokens=10, messages=history)

    assert info.value.type == "invalid_request_error"
    assert "toolu_abc" in (info.value.api_message or "")
    assert "`tool_result`" in (info.value.api_message or "")
    assert len(api.requests) == 1


def _with_tool_turn(result_blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [tool_use("run_code", {}, id="toolu_1")]},
        {"role": "user", "content": result_blocks},
    ]


RESULT_1 = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
CACHED = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"model": None}, "model: Field required"),
        ({"max_tokens": None}, "max_tokens: Field required"),
        ({"messages": None}, "messages: Field required"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_k": 5}, "top_k"),
        ({"thread": {"type": "create"}}, "thread"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "first message"),
        ({"messages": [*USER_HI, *USER_HI]}, "alternate"),
        ({"messages": [*USER_HI, {"role": "assistant", "content": "Sure"}]}, "prefill"),
        ({"messages": [{"role": "user", "content": []}]}, "non-empty"),
        ({"messages": _with_tool_turn([text("note"), RESULT_1])}, "must come first"),
        (
            {"messages": _with_tool_turn([RESULT_1, {**RESULT_1, "tool_use_id": "toolu_x"}])},
            "toolu_x",
        ),
        ({"messages": [{"role": "user", "content": [RESULT_1]}]}, "unexpected `tool_use_id`"),
        ({"tools": [{**RUN_CODE, "name": "run code!"}]}, "tools.0.name"),
        (
            {
                "messages": [{"role": "user", "content": [CACHED] * 4}],
                "cache_control": {"type": "ephemeral"},
            },
            "maximum of 4",
        ),
    ],
)
async def test_invalid_requests_get_400(patch: dict[str, Any], expected: str) -> None:
    body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI, **patch}
    body = {k: v for k, v in body.items() if v is not None}
    async with FakeAnthropic(say("unused")) as api:
        status, payload = await raw_post(api, body, **{"anthropic-version": "2026-10-21"})

    assert status == 400
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
    assert expected in payload["error"]["message"]


async def test_sampling_params_allowed_under_old_api_version() -> None:
    async with FakeAnthropic(say("ok")) as api:
        body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI, "temperature": 0.2}
        status, payload = await raw_post(api, body)

    assert status == 200 and payload["content"] == [text("ok")]


async def test_missing_credentials_get_401() -> None:
    async with FakeAnthropic(say("unused")) as api, aiohttp.ClientSession() as http:
        body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI}
        headers = {"anthropic-version": "2026-10-21"}
        async with http.post(f"{api.base_url}/v1/messages", json=body, headers=headers) as resp:
            payload = await resp.json()

    assert resp.status == 401 and payload["error"]["type"] == "authentication_error"


async def test_thinking_must_come_back_unmodified_and_pause_turn_may_end_on_assistant() -> None:
    def model(req: ModelRequest) -> Reply:
        if req.turn == 0:
            return Reply([thinking("secret plan"), text("partial")], stop_reason="pause_turn")
        return Reply([text("done")])

    async with FakeAnthropic(model) as api, api.client() as client:
        first = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        assert first.stop_reason == "pause_turn"
        resumed = await client.messages.create(
            model=MODEL,
            max_tokens=10,
            messages=[*USER_HI, {"role": "assistant", "content": first.content}],
        )
        assert resumed.content[0].text == "done"

        tampered = first.model_dump()["content"]
        tampered[0]["thinking"] = "edited"
        with pytest.raises(anthropic.BadRequestError, match="cannot be modified"):
            await client.messages.create(
                model=MODEL,
                max_tokens=10,
                messages=[
                    *USER_HI,
                    {"role": "assistant", "content": tampered},
                    {"role": "user", "content": "more"},
                ],
            )


# --------------------------------------------------------------------------- caching


async def test_cached_system_prompt_is_written_then_read() -> None:
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    async with FakeAnthropic(say("ok")) as api, api.client() as client:
        first = await client.messages.create(
            model=MODEL, max_tokens=10, system=system, messages=[{"role": "user", "content": "q1"}]
        )
        second = await client.messages.create(
            model=MODEL,
            max_tokens=10,
            system=system,
            messages=[{"role": "user", "content": "question 2"}],
        )

    system_tokens = first.usage.cache_creation_input_tokens
    assert system_tokens and system_tokens > 1024
    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == system_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.cache_read_input_tokens == system_tokens
    assert second.usage.input_tokens > first.usage.input_tokens  # the longer question


async def test_top_level_cache_control_reads_previous_turn_prefix() -> None:
    def model(req: ModelRequest) -> Reply:
        if req.turn == 0:
            return Reply([text("Let me check."), tool_use("run_code", {"code": "df.describe()"})])
        return Reply([text("Here it is.")])

    auto = {"type": "ephemeral"}
    async with FakeAnthropic(model) as api, api.client() as client:
        messages: list[Any] = [{"role": "user", "content": "describe the data"}]
        kw: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 100,
            "system": LONG_SYSTEM,
            "tools": [RUN_CODE],
        }
        first = await client.messages.create(**kw, messages=messages, cache_control=auto)
        call = first.content[1]
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "count 10"}],
            },
        ]
        second = await client.messages.create(**kw, messages=messages, cache_control=auto)

    turn1_prompt = first.usage.cache_creation_input_tokens
    assert first.usage.cache_read_input_tokens == 0 and first.usage.input_tokens == 0
    assert second.usage.cache_read_input_tokens == turn1_prompt
    assert second.usage.cache_creation_input_tokens > 0 and second.usage.input_tokens == 0


async def test_caching_respects_minimum_and_ttl() -> None:
    short = [{"type": "text", "text": "Short prompt.", "cache_control": {"type": "ephemeral"}}]
    hour = [
        {"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    ]
    async with FakeAnthropic(say("ok")) as api, api.client() as client:
        small = await client.messages.create(
            model=MODEL, max_tokens=10, system=short, messages=USER_HI
        )
        long = await client.messages.create(
            model=MODEL, max_tokens=10, system=hour, messages=USER_HI
        )
        override = Reply([text("ok")], usage={"cache_read_input_tokens": 7})
        api.model_fn = lambda req: override
        forced = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)

    assert small.usage.cache_creation_input_tokens == 0 and small.usage.cache_read_input_tokens == 0
    assert (
        long.usage.cache_creation.ephemeral_1h_input_tokens
        == long.usage.cache_creation_input_tokens
    )
    assert long.usage.cache_creation.ephemeral_5m_input_tokens == 0
    assert forced.usage.cache_read_input_tokens == 7
