"""Thinking blocks: signed by the fake, and checked when they come back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from tests.anthropic_support import MODEL, USER_HI
from tests.fakes.anthropic import (
    FakeAnthropic,
    ModelRequest,
    Reply,
    redacted_thinking,
    text,
    thinking,
    tool_use,
)


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
        assert resumed.content[-1].text == "done"

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


def tool_thinker(req: ModelRequest) -> Reply:
    """Thinks (in the open and redacted) before each tool call."""
    if req.turn < 2:
        call = tool_use("run_code", {"code": f"step {req.turn}"})
        return Reply([thinking(f"plan {req.turn}"), redacted_thinking(), text("Running."), call])
    return Reply([thinking("done"), text("All done.")])


def _answer(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    [call] = [b for b in content if b["type"] == "tool_use"]
    return [
        {"role": "assistant", "content": content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "ok"}],
        },
    ]


async def _two_tool_turns(client: anthropic.AsyncAnthropic) -> list[dict[str, Any]]:
    """A history that has the two tool turns in it, as the SDK returned them."""
    history: list[dict[str, Any]] = list(USER_HI)
    for _ in range(2):
        msg = await client.messages.create(model=MODEL, max_tokens=100, messages=history)
        history += _answer([b.model_dump(exclude_none=True) for b in msg.content])
    return history


def _drop(kind: str) -> Callable[[list[dict[str, Any]]], None]:
    def edit(blocks: list[dict[str, Any]]) -> None:
        blocks.remove(next(b for b in blocks if b["type"] == kind))

    return edit


def _set(kind: str, **fields: Any) -> Callable[[list[dict[str, Any]]], None]:
    def edit(blocks: list[dict[str, Any]]) -> None:
        next(b for b in blocks if b["type"] == kind).update(fields)

    return edit


def _move_thinking_last(blocks: list[dict[str, Any]]) -> None:
    blocks.append(blocks.pop(0))


LATEST = "in the latest assistant message cannot be modified"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_set("thinking", thinking="plan 1, edited"), LATEST),
        (_set("thinking", signature="c2lnbmF0dXJl"), LATEST),
        (_set("thinking", signature=""), "signature: Field required"),
        (_set("redacted_thinking", data="ZGF0YQ=="), "Invalid `data`"),
        (_drop("redacted_thinking"), LATEST),
        (_drop("thinking"), LATEST),
        (_move_thinking_last, LATEST),
    ],
)
async def test_latest_turn_must_carry_its_thinking_back_unchanged(
    edit: Callable[[list[dict[str, Any]]], None], expected: str
) -> None:
    async with FakeAnthropic(tool_thinker) as api, api.client() as client:
        history = await _two_tool_turns(client)
        final = await client.messages.create(model=MODEL, max_tokens=100, messages=history)
        edit(history[3]["content"])  # the latest assistant turn, during the tool loop
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.messages.create(model=MODEL, max_tokens=100, messages=history)

    assert final.content[-1].text == "All done."
    assert expected in (info.value.api_message or "")


async def test_earlier_turns_may_drop_thinking_but_not_alter_it() -> None:
    async with FakeAnthropic(tool_thinker) as api, api.client() as client:
        history = await _two_tool_turns(client)
        earlier = history[1]["content"]
        thoughts = ("thinking", "redacted_thinking")
        history[1]["content"] = [b for b in earlier if b["type"] not in thoughts]
        await client.messages.create(model=MODEL, max_tokens=100, messages=history)
        history[1]["content"] = [{**earlier[0], "thinking": "edited"}, *earlier[1:]]
        with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
            await client.messages.create(model=MODEL, max_tokens=100, messages=history)


async def test_a_follow_up_question_keeps_the_last_answers_thinking() -> None:
    def model(req: ModelRequest) -> Reply:
        return Reply([thinking("answer"), redacted_thinking(), text(f"answer {req.turn}")])

    async with FakeAnthropic(model) as api, api.client() as client:
        first = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        answer = [b.model_dump(exclude_none=True) for b in first.content]
        history = [*USER_HI, {"role": "assistant", "content": answer}, *USER_HI]
        await client.messages.create(model=MODEL, max_tokens=10, messages=history)
        history[1] = {"role": "assistant", "content": answer[::2]}  # the redacted block dropped
        with pytest.raises(anthropic.BadRequestError, match=LATEST):
            await client.messages.create(model=MODEL, max_tokens=10, messages=history)


async def test_signatures_hold_across_fake_servers() -> None:
    """As the API's do across its machines: a conversation saved under one server (a test's
    first bot process) goes on under another."""
    async with FakeAnthropic(tool_thinker) as first, first.client() as client:
        history = await _two_tool_turns(client)
    async with FakeAnthropic(tool_thinker) as second, second.client() as client:
        msg = await client.messages.create(model=MODEL, max_tokens=100, messages=history)
    assert msg.content[-1].text == "All done."
    assert len(first.requests) == 2 and len(second.requests) == 1


async def test_every_reply_of_a_thinking_model_starts_with_signed_thinking() -> None:
    """The script's own thinking is kept; without one the fake thinks for it, and a model
    that does not think (thinking not asked for) gets none."""
    replies = iter([Reply([text("plain")]), Reply([thinking("mine"), text("own")])])
    async with FakeAnthropic(lambda req: next(replies)) as api, api.client() as client:
        added = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
        own = await client.messages.create(model=MODEL, max_tokens=10, messages=USER_HI)
    assert [b.type for b in added.content] == ["thinking", "text"]
    assert added.content[0].thinking and added.content[0].signature
    assert [(b.type, getattr(b, "thinking", None)) for b in own.content] == [
        ("thinking", "mine"),
        ("text", None),
    ]

    async with FakeAnthropic(lambda req: Reply([text("plain")])) as api, api.client() as client:
        quiet = await client.messages.create(
            model="claude-sonnet-4-6", max_tokens=10, messages=USER_HI
        )
        omitted = await client.messages.create(
            model=MODEL,
            max_tokens=10,
            messages=USER_HI,
            thinking={"type": "adaptive", "display": "omitted"},
        )
    assert [b.type for b in quiet.content] == ["text"]
    assert omitted.content[0].type == "thinking" and omitted.content[0].thinking == ""


async def test_thinking_is_bound_to_its_model_and_conversation() -> None:
    async with FakeAnthropic(tool_thinker) as api, api.client() as client:
        history = await _two_tool_turns(client)
        other_model = "claude-fable-5-2"  # thinks too, so the history is read the same way
        with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
            await client.messages.create(model=other_model, max_tokens=100, messages=history)

        # The same turns after another opening question: a splice into another conversation.
        spliced = [{"role": "user", "content": "something else"}, *history[1:]]
        with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
            await client.messages.create(model=MODEL, max_tokens=100, messages=spliced)

        # An earlier turn's thinking moved behind its text: no longer where it was sent.
        moved = [dict(m) for m in history]
        first = list(moved[1]["content"])
        moved[1]["content"] = [first[1], first[2], first[0], *first[3:]]
        with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
            await client.messages.create(model=MODEL, max_tokens=100, messages=moved)

        done = await client.messages.create(model=MODEL, max_tokens=100, messages=history)
    assert done.content[-1].text == "All done."


async def test_another_model_takes_the_conversation_stripped_of_thinking() -> None:
    """Doc 1.4: "Strip or restart instead". The latest turn may then lose its thinking too,
    since another model wrote it; for its own model it may not."""
    async with FakeAnthropic(tool_thinker) as api, api.client() as client:
        history = await _two_tool_turns(client)
        thoughts = ("thinking", "redacted_thinking")
        stripped = [
            {**m, "content": [b for b in m["content"] if b.get("type") not in thoughts]}
            if m["role"] == "assistant"
            else m
            for m in history
        ]
        other = await client.messages.create(
            model="claude-fable-5-2", max_tokens=100, messages=stripped
        )
        with pytest.raises(anthropic.BadRequestError, match=LATEST):
            await client.messages.create(model=MODEL, max_tokens=100, messages=stripped)
    assert other.content[-1].text == "All done."
