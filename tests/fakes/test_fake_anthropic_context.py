"""Server-side context management in the fake: the modes, the edits' checks, tool-result
clearing, and the latest turn coming back stripped of its thinking. Compaction has its own
file (test_fake_anthropic_compaction.py)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.anthropic_support import MODEL, QUIET, USER_HI, beta_stream, plain_stream, say
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, thinking, tool_use
from tests.fakes.anthropic.cache import total_input_tokens
from tests.fakes.anthropic.clearing import PLACEHOLDER
from tests.fakes.anthropic.context import COMPACT_BETA, CONTEXT_BETA

CLEAR = {"type": "clear_tool_uses_20250919"}
LATEST = "in the latest assistant message cannot be modified"

Messages = list[dict[str, Any]]


def tool_history(n: int, names: tuple[str, ...] = ("run_code",), size: int = 2000) -> Messages:
    """A question and ``n`` answered tool calls, cycling through ``names``."""
    history: Messages = [{"role": "user", "content": "analyse the sales"}]
    for i in range(n):
        call = tool_use(names[i % len(names)], {"code": f"step {i}"}, id=f"toolu_{i}")
        result = {
            "type": "tool_result",
            "tool_use_id": call["id"],
            "content": f"r{i} " + "x" * size,
        }
        history += [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]
    return history


def results(req: ModelRequest) -> list[Any]:
    """The content of every tool result the model saw, oldest first."""
    return [
        b["content"]
        for m in req.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


# -- modes


async def test_a_server_without_the_beta_refuses_the_field() -> None:
    edits = {"context_management": {"edits": [CLEAR]}}
    async with FakeAnthropic(say("x"), context_editing="refuse") as api, api.client() as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await plain_stream(client, messages=USER_HI, extra_body=edits)
        assert (await plain_stream(client, messages=USER_HI)).content[0].text == "x"
    assert (info.value.api_message or "").startswith("context_management:")


async def test_a_compatible_server_ignores_the_field() -> None:
    edits = {
        "context_management": {"edits": [{**CLEAR, "trigger": {"type": "tool_uses", "value": 1}}]}
    }
    history = tool_history(5)
    async with FakeAnthropic(say("x"), context_editing="ignore") as api, api.client() as client:
        await plain_stream(client, messages=history, extra_body=edits)
    assert "context_management" not in api.replies[0]
    assert api.requests[0].messages == history and PLACEHOLDER not in results(api.requests[0])


async def test_applied_edits_are_reported_even_when_none_applied() -> None:
    async with FakeAnthropic(say("x")) as api, api.client() as client:
        final = await beta_stream(client, messages=USER_HI, context_management={"edits": [CLEAR]})
        plain = await beta_stream(client, messages=USER_HI)
    assert final.context_management is not None and final.context_management.applied_edits == []
    assert plain.context_management is None and "context_management" not in api.replies[1]


# -- validation


@pytest.mark.parametrize(
    ("edit", "beta", "expected"),
    [
        (CLEAR, COMPACT_BETA, CONTEXT_BETA),
        ({"type": "compact_20260112"}, CONTEXT_BETA, COMPACT_BETA),
        (
            {**CLEAR, "keepp": {"type": "tool_uses", "value": 1}},
            CONTEXT_BETA,
            "keepp: Extra inputs",
        ),
        ({**CLEAR, "keep": {"type": "tool_uses", "value": -1}}, CONTEXT_BETA, "greater than or"),
        ({**CLEAR, "trigger": {"type": "turns", "value": 1}}, CONTEXT_BETA, "trigger.type"),
        ({**CLEAR, "clear_tool_inputs": "yes"}, CONTEXT_BETA, "clear_tool_inputs"),
        ({**CLEAR, "exclude_tools": [1]}, CONTEXT_BETA, "exclude_tools"),
        (
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 49_999}},
            COMPACT_BETA,
            "trigger.value: Input should be greater than or equal to 50000",
        ),
    ],
)
async def test_edits_are_checked_strictly(edit: dict[str, Any], beta: str, expected: str) -> None:
    async with FakeAnthropic(say("x")) as api, api.client() as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await beta_stream(
                client, messages=USER_HI, betas=[beta], context_management={"edits": [edit]}
            )
    assert expected in (info.value.api_message or "")


# -- clear_tool_uses_20250919


async def test_clearing_fires_only_past_the_trigger_and_keeps_the_last_ones() -> None:
    history = tool_history(5)
    edit = {
        **CLEAR,
        "trigger": {"type": "tool_uses", "value": 4},
        "keep": {"type": "tool_uses", "value": 2},
    }
    async with FakeAnthropic(say("x")) as api, api.client() as client:
        under = await beta_stream(
            client, messages=history[:-2], context_management={"edits": [edit]}
        )
        past = await beta_stream(client, messages=history, context_management={"edits": [edit]})
    assert under.context_management.applied_edits == []
    assert PLACEHOLDER not in results(api.requests[0])
    [applied] = past.context_management.applied_edits
    assert applied.cleared_tool_uses == 3 and applied.cleared_input_tokens > 1000
    seen = results(api.requests[1])
    assert seen[:3] == [PLACEHOLDER] * 3 and seen[3].startswith("r3 ") and seen[4].startswith("r4 ")
    assert api.requests[1].sent_messages == history  # the client's history as it sent it
    assert results(ModelRequest({"messages": history}, {}))[0].startswith("r0 ")


async def test_clearing_honours_exclude_tools_inputs_and_clear_at_least() -> None:
    history = tool_history(6, names=("run_code", "read_file"))
    fires = {
        **CLEAR,
        "trigger": {"type": "input_tokens", "value": 1000},
        "keep": {"type": "tool_uses", "value": 0},
    }
    edits = [
        {**fires, "exclude_tools": ["read_file"], "clear_tool_inputs": ["run_code"]},
        {**fires, "clear_at_least": {"type": "input_tokens", "value": 1_000_000}},
    ]
    async with FakeAnthropic(say("x")) as api, api.client() as client:
        for edit in edits:
            await beta_stream(client, messages=history, context_management={"edits": [edit]})
    excluded, too_little = api.requests
    seen = results(excluded)
    assert seen[0::2] == [PLACEHOLDER] * 3 and PLACEHOLDER not in seen[1::2]
    calls = [b for m in excluded.messages if m["role"] == "assistant" for b in m["content"]]
    assert [c["input"] for c in calls[:2]] == [{}, {"code": "step 1"}]
    assert excluded.applied_edits[0]["cleared_tool_uses"] == 3
    assert too_little.applied_edits == [] and PLACEHOLDER not in results(too_little)


async def test_a_prompt_over_the_window_is_accepted_once_clearing_brings_it_under() -> None:
    history = tool_history(6, size=4000)
    window = total_input_tokens({"model": QUIET, "messages": history}) - 2000
    edit = {
        **CLEAR,
        "trigger": {"type": "input_tokens", "value": 1},
        "keep": {"type": "tool_uses", "value": 1},
    }
    async with FakeAnthropic(say("fits"), context_window=window) as api, api.client() as client:
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            await beta_stream(client, messages=history)
        final = await beta_stream(client, messages=history, context_management={"edits": [edit]})
    assert final.content[0].text == "fits"
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens < window
    assert results(api.requests[1]).count(PLACEHOLDER) == 5


# -- the latest turn stripped of its thinking


async def test_a_finished_turn_may_come_back_stripped_but_a_tool_turn_may_not() -> None:
    def model(req: ModelRequest) -> Reply:
        if req.last_user_text == "run it":
            return Reply([thinking("call"), tool_use("run_code", {"code": "1"})])
        return Reply([thinking("think"), text(f"answer {req.turn}")])

    async with FakeAnthropic(model) as api, api.client() as client:
        first = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        answer = [b.model_dump(exclude_none=True) for b in first.content if b.type == "text"]
        again = [
            *USER_HI,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": "run it"},
        ]
        call = await client.messages.create(model=MODEL, max_tokens=10, messages=again)
        [use] = [b.model_dump(exclude_none=True) for b in call.content if b.type == "tool_use"]
        result = {"type": "tool_result", "tool_use_id": use["id"], "content": "1"}
        looped = [
            *again,
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
        with pytest.raises(anthropic.BadRequestError, match=LATEST):
            await client.messages.create(model=MODEL, max_tokens=10, messages=looped)
    assert call.stop_reason == "tool_use" and len(api.requests) == 3
