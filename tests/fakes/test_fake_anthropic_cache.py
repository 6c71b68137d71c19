"""Prompt caching in the fake: what is written, what is read, and what misses."""

from __future__ import annotations

from typing import Any

from tests.anthropic_support import LONG_SYSTEM, MODEL, RUN_CODE, USER_HI, say
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use


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
        call = first.content[-1]
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


REORDERED_TOOL = {  # RUN_CODE with its keys in another order: the same tool, other bytes
    "input_schema": {"properties": {"code": {"type": "string"}}, "type": "object"},
    "name": "run_code",
    "description": "Run Python code in the sandbox.",
}


def _cached_request(**changes: Any) -> dict[str, Any]:
    """A request with a breakpoint after the system prompt and the automatic one at its end,
    with ``changes`` applied to it."""
    call = tool_use("run_code", {"code": "print(1)", "timeout": 5}, id="toolu_1")
    messages = [
        {"role": "user", "content": "describe the data"},
        {"role": "assistant", "content": [text("Let me look."), call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "10 rows"}],
        },
    ]
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "system": system,
        "tools": [RUN_CODE],
        "messages": messages,
        "cache_control": {"type": "ephemeral"},
    }
    return {**body, **changes}


def _reserialised(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The same history with the tool call's input keys in another order."""
    messages = [dict(m) for m in body["messages"]]
    said, call = messages[1]["content"]
    messages[1]["content"] = [said, {**call, "input": dict(reversed(call["input"].items()))}]
    return messages


async def test_only_a_byte_identical_prefix_is_read_from_the_cache() -> None:
    async with FakeAnthropic(say("ok")) as api, api.client() as client:
        body = _cached_request()
        first = await client.messages.create(**body)
        same = await client.messages.create(**body)
        messages_changed = await client.messages.create(**{**body, "messages": _reserialised(body)})
        api.cache.clear()
        await client.messages.create(**body)
        tools_changed = await client.messages.create(**{**body, "tools": [REORDERED_TOOL]})

    whole = first.usage.cache_creation_input_tokens
    assert first.usage.cache_read_input_tokens == 0 and whole > 1024
    assert same.usage.cache_read_input_tokens == whole
    assert same.usage.cache_creation_input_tokens == 0
    # A re-serialised tool call: tools and system are read, the messages written again.
    assert 1024 < messages_changed.usage.cache_read_input_tokens < whole
    assert messages_changed.usage.cache_creation_input_tokens > 0
    # A tool schema with its keys reordered comes first, so nothing is read at all.
    assert tools_changed.usage.cache_read_input_tokens == 0
    assert tools_changed.usage.cache_creation_input_tokens == whole


async def test_a_moved_breakpoint_still_reads_the_prefix() -> None:
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": {"type": "ephemeral"}}]
    async with FakeAnthropic(say("ok")) as api, api.client() as client:
        first = await client.messages.create(
            model=MODEL, max_tokens=10, system=system, messages=USER_HI
        )
        unmarked = [{"type": "text", "text": LONG_SYSTEM}]
        later = await client.messages.create(
            model=MODEL,
            max_tokens=10,
            system=unmarked,
            messages=USER_HI,
            cache_control={"type": "ephemeral"},
        )

    assert later.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


class Clock:
    """The cache's time, moved on by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _ask(client: Any, ttl: str | None = None) -> Any:
    marker: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    system = [{"type": "text", "text": LONG_SYSTEM, "cache_control": marker}]
    return await client.messages.create(model=MODEL, max_tokens=10, system=system, messages=USER_HI)


async def test_an_entry_expires_after_its_ttl_and_a_hit_refreshes_it() -> None:
    clock = Clock()
    async with FakeAnthropic(say("ok"), clock=clock) as api, api.client() as client:
        written = await _ask(client)
        clock.now += 299  # within 5 minutes: read, and the entry's 5 minutes start again
        refreshed = await _ask(client)
        clock.now += 299  # 598 s after the write, 299 after the read: still there
        kept = await _ask(client)
        clock.now += 301  # more than 5 minutes since the last read: gone
        expired = await _ask(client)
    prefix = written.usage.cache_creation_input_tokens
    assert prefix > 1024 and written.usage.cache_creation.ephemeral_5m_input_tokens == prefix
    for hit in (refreshed, kept):
        assert hit.usage.cache_read_input_tokens == prefix
        assert hit.usage.cache_creation_input_tokens == 0
    assert expired.usage.cache_read_input_tokens == 0
    assert expired.usage.cache_creation_input_tokens == prefix


async def test_a_one_hour_entry_outlives_five_minutes_but_not_an_hour() -> None:
    clock = Clock()
    async with FakeAnthropic(say("ok"), clock=clock) as api, api.client() as client:
        written = await _ask(client, ttl="1h")
        clock.now += 3000
        read = await _ask(client, ttl="1h")
        clock.now += 3601
        expired = await _ask(client, ttl="1h")
    prefix = written.usage.cache_creation.ephemeral_1h_input_tokens
    assert prefix > 1024 and read.usage.cache_read_input_tokens == prefix
    assert expired.usage.cache_read_input_tokens == 0
    assert expired.usage.cache_creation.ephemeral_1h_input_tokens == prefix
