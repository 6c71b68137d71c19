"""The bot against the fake's strict rules: thinking blocks sent back unchanged, a cached
prefix resent byte for byte, the server's retry-after honoured, clear failures for an unknown
model or an oversized request."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

from bot.run_events import RunFailed, RunFinished
from bot.settings import DEFAULT_MODEL
from tests.agent.test_agent_loop import run_python, session_with
from tests.fakes.anthropic import (
    FakeAnthropic,
    ModelRequest,
    Reply,
    StreamError,
    http_error,
    redacted_thinking,
    stream_error,
    text,
    thinking,
)
from tests.support import Recorder, runtime_for


def thinker(req: ModelRequest) -> Reply:
    """The default model thinks before each tool call and before it answers."""
    match req.turn:
        case 0:
            return Reply([thinking("Look at the numbers first."), run_python("print(6 * 7)")])
        case 1:
            check = run_python("print(42 == 6 * 7)")
            return Reply([thinking("Check it."), redacted_thinking(), text("Checking."), check])
        case 2:
            return Reply([thinking("Both agree."), text("The answer is 42.")])
        case _:
            return Reply([thinking("Asked again."), redacted_thinking(), text("Still 42.")])


async def test_thinking_blocks_go_back_unchanged(sandbox_root: Path) -> None:
    async with session_with(thinker, sandbox_root) as (session, fake):
        first = await session.ask("what is 6 * 7?", Recorder())
        follow = await session.ask("sure?", Recorder())
    assert isinstance(first, RunFinished) and first.answer == "The answer is 42."
    assert isinstance(follow, RunFinished) and follow.answer == "Still 42."
    assert {r.model for r in fake.requests} == {DEFAULT_MODEL}
    # Every turn the fake sent, signatures and redacted data included, came back as sent.
    sent_back = [m["content"] for m in fake.requests[-1].messages if m["role"] == "assistant"]
    assert sent_back == [reply["content"] for reply in fake.replies[:3]]
    assert len(fake.requests) == 4  # no request was refused and retried


def _prompt(req: ModelRequest) -> list[str]:
    """The request's prompt in cache order, each block's JSON exactly as sent (markers aside)."""

    def unmarked(block: Any) -> str:
        if isinstance(block, dict):
            block = {k: v for k, v in block.items() if k != "cache_control"}
        return json.dumps(block, ensure_ascii=False)

    parts = [unmarked(t) for t in req.body.get("tools", [])]
    parts += [unmarked(b) for b in req.body.get("system", [])]
    for message in req.messages:
        parts += [message["role"], *(unmarked(b) for b in message["content"])]
    return parts


def analyst(req: ModelRequest) -> Reply:
    if not req.tool_results():
        return Reply([text("Let me look."), run_python("print(sum(range(10)))")])
    return Reply([text(f"Done: {req.tool_results()[0].text[-20:]}")])


async def test_each_request_resends_the_last_one_byte_for_byte(sandbox_root: Path) -> None:
    async with session_with(analyst, sandbox_root, min_cache_tokens=512) as (session, fake):
        await session.ask("sum it", Recorder())
        await session.ask("and again", Recorder())
        await session.suspend()  # the thread went quiet: the next question gets a new sandbox
        await session.ask("once more", Recorder())
        await session.ask("last one", Recorder())
    assert len(fake.requests) == 8
    for before, after in pairwise(fake.requests):
        previous = _prompt(before)
        assert _prompt(after)[: len(previous)] == previous
    # So each request reads all of the one before from the cache, and writes only what is new.
    for before, after in pairwise(fake.replies):
        u = before["usage"]
        whole = u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        assert after["usage"]["cache_read_input_tokens"] == whole
    # The fresh sandbox was still announced, in the question that followed it.
    told = [b.get("text", "") for b in fake.requests[4].messages[-1]["content"]]
    assert any("this is a fresh one" in t for t in told)


async def test_unknown_model_fails_at_once_with_a_clear_reason(sandbox_root: Path) -> None:
    say = lambda req: Reply([text("never")])  # noqa: E731
    async with session_with(say, sandbox_root, anthropic_model="claude-sonnet-9") as (s, fake):
        result = await s.ask("hi", Recorder())
    assert isinstance(result, RunFailed) and "ANTHROPIC_MODEL" in result.reason
    assert len(fake.requests) == 1  # a 404 is not retried


async def test_oversized_request_fails_at_once_with_a_clear_reason(sandbox_root: Path) -> None:
    say = lambda req: Reply([text("never")])  # noqa: E731
    async with session_with(say, sandbox_root, max_request_bytes=40_000) as (session, fake):
        result = await session.ask("x" * 50_000, Recorder())
    assert isinstance(result, RunFailed) and "too large" in result.reason
    assert "try again" not in result.reason
    assert len(fake.requests) == 1  # a 413 is not retried


async def test_turn_retry_waits_as_long_as_the_server_asked(sandbox_root: Path) -> None:
    done = lambda req: Reply([text("done")])  # noqa: E731
    async with session_with(done, sandbox_root) as (session, fake):
        # The SDK's three tries all meet a 429 asking for 0.3 s; the turn is tried again.
        fake.fail_next(3, http_error(429, retry_after_ms=300))
        result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFinished) and len(fake.requests) == 4
    gaps = [b.received_at - a.received_at for a, b in pairwise(fake.requests)]
    assert all(gap >= 0.3 for gap in gaps), gaps  # the bot's own delay alone is 0.01 s


async def test_a_turn_retried_mid_stream_resends_the_history_as_it_was(
    sandbox_root: Path,
) -> None:
    """The second turn's stream breaks after its thinking and some text went out; the retry
    sends the first turn back untouched and nothing of the broken one."""
    broken: list[ModelRequest] = []

    def script(req: ModelRequest) -> Reply | StreamError:
        if req.turn == 1 and not broken:
            broken.append(req)
            partial = [thinking("Half a thought."), text("The answer is")]
            return stream_error("overloaded_error", after_blocks=2, content=partial)
        return thinker(req)

    # A max_tokens the SDK will not send unstreamed: the turn streams.
    async with session_with(script, sandbox_root, max_output_tokens=32_000) as (session, fake):
        result = await session.ask("what is 6 * 7?", Recorder())
    assert isinstance(result, RunFinished) and result.answer == "The answer is 42."
    assert all(r.stream for r in fake.requests)
    retried = fake.requests[2]
    assert retried.messages == broken[0].messages  # the same conversation, sent again
    history = session.agent.history
    assert all("Half a thought." not in json.dumps(m) for m in history)
    assert len(fake.requests) == 4  # turn 1, the broken turn 2, its retry, turn 3


async def test_a_conversation_goes_on_after_the_model_is_changed(sandbox_root: Path) -> None:
    """Thinking is bound to the model that wrote it (doc 1.4): after a restart with another
    ANTHROPIC_MODEL, the saved conversation goes on without the old model's thinking. The
    first run was cut mid-tool-loop, so its latest turn is one the old model wrote."""
    new_model = "claude-opus-5-5"
    async with FakeAnthropic(thinker) as fake:
        before = runtime_for(fake.base_url, sandbox_root)
        session = before.sessions.new("switch")
        try:
            await session.ask("what is 6 * 7?", Recorder())
        finally:
            await session.close()
            await before.close()
        saved = json.loads(json.dumps(session.agent.history))
        cut = saved[:2]  # the first tool call, unanswered: the crash case
        for history in (saved, cut):
            after = runtime_for(fake.base_url, sandbox_root, anthropic_model=new_model)
            resumed = after.sessions.new("switch", history=history)
            try:
                result = await resumed.ask("sure?", Recorder())
            finally:
                await resumed.close()
                await after.close()
            assert isinstance(result, RunFinished), result
    # Every thinking block the new model was sent back is one it wrote itself.
    own = {
        b.get("signature") for r in fake.replies if r["model"] == new_model for b in r["content"]
    }
    for req in fake.requests:
        if req.model == new_model:
            sent = [b for m in req.messages if m["role"] == "assistant" for b in m["content"]]
            assert {b["signature"] for b in sent if b["type"] == "thinking"} <= own
            assert all("model" not in m for m in req.messages)
    # Nothing refused, nothing retried; the cut history's "42" was printed by no step that
    # finished (its step was cut), so that answer went back to the model once.
    assert len(fake.requests) == 3 + 1 + 2 + 1
    assert "appear in no step's output: 42 " in fake.requests[-1].last_user_text
