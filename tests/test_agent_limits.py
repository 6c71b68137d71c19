"""The bot against the model's sizes (a full context window, a prompt too long for it) and
its rate limits (no `retry-after`, or one of minutes)."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

from bot.agent.events import RunFailed, RunFinished
from tests.fakes.anthropic_api import FakeAnthropic, ModelRequest, Reply, http_error, text
from tests.fakes.anthropic_cache import total_input_tokens
from tests.support import Recorder
from tests.test_agent_loop import run_python, session_with


async def test_a_turn_that_fills_the_window_leaves_a_usable_history(sandbox_root: Path) -> None:
    """The turn stopped mid-call: its call is answered unrun, so a follow-up is accepted."""

    def script(req: ModelRequest) -> Reply:
        if req.turn == 0:
            call = run_python("print('never run')")
            return Reply([text("Let me run"), call], stop_reason="model_context_window_exceeded")
        return Reply([text("A shorter answer.")])

    async with session_with(script, sandbox_root) as (session, fake):
        full = await session.ask("analyse everything", Recorder())
        follow = await session.ask("just the summary, then", Recorder())
    assert isinstance(full, RunFinished) and full.stop == "model_context_window_exceeded"
    assert "context window" in full.answer and "new conversation" in full.answer
    assert isinstance(follow, RunFinished) and follow.answer == "A shorter answer."
    [unrun] = fake.requests[1].merged_messages[2]["content"][:1]
    assert unrun["type"] == "tool_result" and unrun["is_error"]


async def test_a_prompt_too_long_for_the_window_fails_with_a_clear_reason(
    sandbox_root: Path,
) -> None:
    servers: list[FakeAnthropic] = []

    def script(req: ModelRequest) -> Reply:
        # The window fits the first prompt, not the long output that follows it.
        servers[0].context_window = total_input_tokens(req.body) + 200
        return Reply([run_python("print('x' * 8000)")])

    async with session_with(script, sandbox_root) as (session, fake):
        servers.append(fake)
        result = await session.ask("print a lot", Recorder())
    assert isinstance(result, RunFailed) and result.cause == "model"
    assert "context window" in result.reason and "new conversation" in result.reason
    assert len(fake.requests) == 2  # a 400 is not retried


async def test_a_429_without_retry_after_is_backed_off_and_retried(sandbox_root: Path) -> None:
    """A spend-cap 429 says nothing of when to come back: the SDK waits by itself."""
    async with session_with(lambda req: Reply([text("done")]), sandbox_root) as (session, fake):
        fake.fail_next(2, http_error(429, retry_after_ms=None))
        result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFinished) and result.answer == "done"
    assert [r.retry_count for r in fake.requests] == [0, 1, 2]
    gaps = [b.received_at - a.received_at for a, b in pairwise(fake.requests)]
    assert all(gap >= 0.5 * 0.75 for gap in gaps), gaps  # the SDK's backoff, not 0


async def test_a_wait_of_minutes_fails_the_run_at_once_and_says_so(sandbox_root: Path) -> None:
    """The SDK would sleep through any `retry-after`; a run must not hang for minutes."""
    async with session_with(lambda req: Reply([text("never")]), sandbox_root) as (session, fake):
        fake.fail_next(1, http_error(429, retry_after_s=120))
        async with asyncio.timeout(60):  # the SDK alone would wait 120 s, then the bot more
            result = await session.ask("hi", Recorder())
    assert isinstance(result, RunFailed) and result.cause == "model"
    assert "2 minutes" in result.reason and "rate-limiting" in result.reason
    assert len(fake.requests) == 1
