"""Requests the fake refuses as the API does: shape, credentials and per-model rules."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import pytest

from bot.agent.pricing import price_table
from bot.settings import DEFAULT_MODEL
from tests.anthropic_support import MODEL, RUN_CODE, USER_HI, raw_post, say
from tests.fakes.anthropic import (
    KNOWN_MODELS,
    MAX_REQUEST_BYTES,
    FakeAnthropic,
    ModelRequest,
    Reply,
    text,
    tool_use,
)


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
        ({"messages": [*USER_HI, {"role": "assistant", "content": "Sure"}]}, "prefill"),
        ({"messages": [{"role": "user", "content": []}]}, "non-empty"),
        (
            {"messages": [{"role": "user", "content": "hi", "model": MODEL}]},
            "messages.0.model: Extra inputs are not permitted",
        ),
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
        status, payload, _ = await raw_post(api, body, **{"anthropic-version": "2026-10-21"})

    assert status == 400
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
    assert expected in payload["error"]["message"]


async def test_sampling_params_allowed_under_old_api_version() -> None:
    async with FakeAnthropic(say("ok")) as api:
        body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI, "temperature": 0.2}
        status, payload, _ = await raw_post(api, body)

    assert status == 200 and payload["content"][1:] == [text("ok")]


async def test_missing_credentials_get_401() -> None:
    async with FakeAnthropic(say("unused")) as api, aiohttp.ClientSession() as http:
        body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI}
        headers = {"anthropic-version": "2026-10-21"}
        async with http.post(f"{api.base_url}/v1/messages", json=body, headers=headers) as resp:
            payload = await resp.json()

    assert resp.status == 401 and payload["error"]["type"] == "authentication_error"


def test_the_fake_knows_the_bots_models() -> None:
    """The bot's default model and every priced model exist; a typo would 404 in production."""
    assert DEFAULT_MODEL in KNOWN_MODELS
    assert set(price_table()) <= set(KNOWN_MODELS)


async def test_unknown_model_gets_404() -> None:
    body = {"model": "claude-sonnet-9", "max_tokens": 10, "messages": USER_HI}
    async with FakeAnthropic(say("unused")) as api, api.client(max_retries=2) as client:
        status, payload, _ = await raw_post(api, body)
        with pytest.raises(anthropic.NotFoundError) as info:
            await client.messages.create(**body)
        with pytest.raises(anthropic.NotFoundError):
            await client.messages.count_tokens(model="claude-sonnet-9", messages=USER_HI)
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("claude-sonnet-9")

    assert status == 404 and set(payload) == {"type", "error", "request_id"}
    assert payload["type"] == "error" and payload["request_id"].startswith("req_")
    assert payload["error"] == {"type": "not_found_error", "message": "model: claude-sonnet-9"}
    assert info.value.type == "not_found_error"
    assert len(api.requests) == 2  # the raw post and one SDK attempt: a 404 is not retried


async def test_known_models_are_configurable() -> None:
    async with FakeAnthropic(say("ok"), models=["llama3.1"]) as api, api.client() as client:
        msg = await client.messages.create(model="llama3.1", max_tokens=10, messages=USER_HI)
        with pytest.raises(anthropic.NotFoundError):
            await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        listed = [m.id async for m in client.models.list()]
    assert msg.model == "llama3.1" and listed == ["llama3.1"]


FORCED = {"type": "tool", "name": "run_code"}
ADAPTIVE = {"type": "adaptive"}
H1 = {"type": "ephemeral", "ttl": "1h"}
M5 = {"type": "ephemeral", "ttl": "5m"}


def _marked(marker: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": marker}]}]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        # 0.3 and 1.3: forced tool choice where thinking is always on, or is turned on
        ({"tool_choice": FORCED}, "forces tool use"),
        ({"tool_choice": {"type": "any"}}, "forces tool use"),
        ({"model": "claude-haiku-4-5", "tool_choice": FORCED, "thinking": ADAPTIVE}, "forces"),
        # 1.2: thinking always on; the budget form refused on newer models
        ({"thinking": {"type": "disabled"}}, "cannot be disabled"),
        (
            {"model": "claude-opus-4-7", "thinking": {"type": "enabled", "budget_tokens": 1024}},
            "type 'enabled'",
        ),
        # 3: 1h breakpoints before 5m ones, the top-level marker coming last
        (
            {
                "system": [{"type": "text", "text": "s", "cache_control": M5}],
                "messages": _marked(H1),
            },
            "ttl='1h'",
        ),
        ({"messages": _marked(M5), "cache_control": H1}, "ttl='1h'"),
        ({"messages": _marked({"type": "ephemeral", "ttl": "2h"})}, "cache_control.ttl"),
    ],
)
async def test_model_and_cache_rules_get_400(patch: dict[str, Any], expected: str) -> None:
    body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI, "tools": [RUN_CODE], **patch}
    async with FakeAnthropic(say("unused")) as api:
        status, payload, _ = await raw_post(api, body)
        counted, _, _ = await raw_post(api, body, "/v1/messages/count_tokens")

    assert status == 400 and payload["error"]["type"] == "invalid_request_error"
    assert expected in payload["error"]["message"]
    assert counted == 400  # count_tokens takes the same parameters and the same checks


@pytest.mark.parametrize(
    "patch",
    [
        {"tool_choice": {"type": "auto"}},
        {"model": "claude-haiku-4-5", "tool_choice": FORCED},  # no thinking asked for
        {"model": "claude-opus-4-6", "thinking": {"type": "enabled", "budget_tokens": 1024}},
        {"model": "claude-haiku-4-5", "thinking": {"type": "disabled"}},
        {"system": [{"type": "text", "text": "s", "cache_control": H1}], "messages": _marked(M5)},
        {"messages": _marked(H1), "cache_control": M5},
    ],
)
async def test_what_those_rules_allow(patch: dict[str, Any]) -> None:
    body = {"model": MODEL, "max_tokens": 10, "messages": USER_HI, "tools": [RUN_CODE], **patch}
    async with FakeAnthropic(say("ok")) as api:
        status, payload, _ = await raw_post(api, body)
    assert status == 200, payload


async def test_request_over_the_documented_size_gets_413() -> None:
    assert MAX_REQUEST_BYTES == 32_000_000  # doc 1.7: "about 32 MB per request"
    big = [{"role": "user", "content": "x" * MAX_REQUEST_BYTES}]
    body = {"model": MODEL, "max_tokens": 10, "messages": big}
    async with FakeAnthropic(say("unused")) as api:
        status, payload, _ = await raw_post(api, body)
    assert status == 413 and payload["error"]["type"] == "request_too_large"


async def test_request_size_limit_is_configurable_and_not_retried() -> None:
    fake = FakeAnthropic(say("ok"), max_request_bytes=10_000)
    async with fake as api, api.client(max_retries=2) as client:
        fits = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        with pytest.raises(anthropic.APIStatusError) as info:
            await client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x" * 10_000}]
            )
    assert fits.content[-1].text == "ok"
    assert info.value.status_code == 413 and info.value.type == "request_too_large"
    assert len(api.requests) == 2


async def test_consecutive_same_role_messages_are_merged() -> None:
    seen = []

    def model(req: ModelRequest) -> Reply:
        seen.append(req.merged_messages)
        return Reply([text("ok")])

    call = tool_use("run_code", {"code": "1"}, id="toolu_1")
    history = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [text("second")]},
        {"role": "assistant", "content": [text("Let me run it.")]},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
        {"role": "user", "content": "and?"},
    ]
    async with FakeAnthropic(model) as api, api.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=history)

    assert msg.content[-1].text == "ok"
    assert [m["role"] for m in seen[0]] == ["user", "assistant", "user"]
    assert [b["type"] for b in seen[0][1]["content"]] == ["text", "tool_use"]
    assert api.requests[0].messages == history  # as sent
    assert api.requests[0].turn == 1 and api.requests[0].last_user_text == "and?"


# --------------------------------------------------------------------------- sizes (4, 6)


@pytest.mark.parametrize(
    ("model", "cap"),
    [("claude-sonnet-5-5", 128_000), ("claude-sonnet-4-6", 64_000), ("claude-haiku-4-5", 64_000)],
)
async def test_max_tokens_above_the_models_cap_is_refused(model: str, cap: int) -> None:
    async with FakeAnthropic(say("ok")) as api:
        at_cap = {"model": model, "max_tokens": cap, "messages": USER_HI}
        fits, _, _ = await raw_post(api, at_cap)
        over = {"model": model, "max_tokens": cap + 1, "messages": USER_HI}
        status, payload, _ = await raw_post(api, over)
    assert fits == 200
    assert status == 400 and payload["error"]["type"] == "invalid_request_error"
    assert f"max_tokens: {cap + 1} > {cap}" in payload["error"]["message"]


async def test_a_prompt_longer_than_the_window_is_refused() -> None:
    """The window is each model's own (200K on Haiku 4.5), or the one the fake is given; the
    count is the one usage reports, and count_tokens still counts a prompt too long."""
    long_question = [{"role": "user", "content": "x" * 4 * 250_000}]  # about 250K tokens
    async with FakeAnthropic(say("ok")) as api, api.client(max_retries=2) as client:
        big = await client.messages.create(model=MODEL, max_tokens=10, messages=long_question)
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(
                model="claude-haiku-4-5", max_tokens=10, messages=long_question
            )
    prompt = big.usage.input_tokens
    assert prompt > 200_000
    assert info.value.type == "invalid_request_error"
    assert info.value.api_message == f"prompt is too long: {prompt} tokens > 200000 maximum"
    assert len(api.requests) == 2  # a 400: the SDK does not retry it

    async with FakeAnthropic(say("ok"), context_window=50) as api, api.client() as client:
        short = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        counted = await client.messages.count_tokens(model=MODEL, messages=long_question)
        described = await client.models.retrieve(MODEL)
        with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: \d+ tokens > 50"):
            await client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "y" * 400}]
            )
    assert short.usage.input_tokens <= 50 and counted.input_tokens == prompt
    assert described.max_input_tokens == 50


async def test_a_script_can_fill_the_context_window() -> None:
    full = Reply([text("I ran out of ")], stop_reason="model_context_window_exceeded")
    async with FakeAnthropic(lambda req: full) as api, api.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
    assert msg.stop_reason == "model_context_window_exceeded"
