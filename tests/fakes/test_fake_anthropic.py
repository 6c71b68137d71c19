"""The fake Messages API server, exercised through the real ``anthropic.AsyncAnthropic``."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from tests.anthropic_support import MODEL, RUN_CODE, USER_HI, say, visible
from tests.fakes.anthropic import (
    FakeAnthropic,
    ModelRequest,
    Reply,
    text,
    thinking,
    tool_use,
)

# --------------------------------------------------------------------------- happy paths


async def test_create_returns_scripted_text() -> None:
    async with FakeAnthropic(say("Hello from the fake")) as api, api.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=100, messages=USER_HI)

    thought, answer = msg.content  # the model always thinks: a thinking block comes first
    assert thought.type == "thinking" and thought.thinking and len(thought.signature) > 20
    assert answer.type == "text" and answer.text == "Hello from the fake"
    assert msg.stop_reason == "end_turn"
    assert msg.model == MODEL
    assert msg._request_id and msg._request_id.startswith("req_")
    assert (
        msg.usage.input_tokens > 0 and msg.usage.output_tokens == 5 + 7
    )  # the text, then the thinking
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

    [sent] = api.replies
    assert [b.model_dump(exclude_none=True) for b in final.content] == sent["content"]
    assert sent["content"][1:] == scripted[1:]
    assert final.content[0].thinking == "Let me compute that."
    assert len(final.content[0].signature) > 20  # signed by the server
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
    # The model always thinks: block 0 is its thinking, in the documented order (1.8).
    thought = [(n, d) for n, d in events[2:] if d.get("index") == 0]
    assert thought[0][1]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    kinds = [d["delta"]["type"] for n, d in thought[1:-1]]
    assert kinds[-1] == "signature_delta" and set(kinds[:-1]) == {"thinking_delta"}
    assert len(kinds) >= 2 and thought[-1][0] == "content_block_stop"
    assert names.index("content_block_start", 3) > events.index(thought[-1])
    text_deltas = [
        d["delta"]["text"] for n, d in events if n == "content_block_delta" and d["index"] == 1
    ]
    assert len(text_deltas) >= 2 and "".join(text_deltas) == "Hello there"
    json_parts = [
        d["delta"]["partial_json"]
        for n, d in events
        if n == "content_block_delta" and d["index"] == 2
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
        [call] = visible(first)
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

    assert visible(second)[0].text == "The answer is 42"
    assert api.requests[1].tools == ["run_code"] and api.requests[1].system_text == "Be brief."


async def test_count_tokens_and_models() -> None:
    async with FakeAnthropic(say("-"), models=[MODEL]) as api, api.client() as client:
        counted = await client.messages.count_tokens(model=MODEL, messages=USER_HI)
        created = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        models = [m.id async for m in client.models.list()]

    assert counted.input_tokens == created.usage.input_tokens
    assert models == [MODEL]
