"""The bot against the model's sizes (a full context window, a prompt too long for it) and
its rate limits (no `retry-after`, or one of minutes)."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

from bot.agent.compact import SYSTEM as SUMMARY_SYSTEM
from bot.run_events import RunFailed, RunFinished, ToolCallStarted
from tests.agent.test_agent_loop import run_python, session_with
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, http_error, text
from tests.fakes.anthropic.cache import total_input_tokens
from tests.support import Recorder


async def test_a_turn_that_fills_the_window_is_compacted_and_answered(sandbox_root: Path) -> None:
    """The turn stopped mid-call: it is dropped, the conversation summarised, the turn tried
    again; its call never ran."""

    def script(req: ModelRequest) -> Reply:
        if req.system_text == SUMMARY_SYSTEM:
            return Reply([text("The user asked to analyse everything.")])
        if "summarised" not in req.last_user_text:
            call = run_python("print('never run')")
            return Reply([text("Let me run"), call], stop_reason="model_context_window_exceeded")
        return Reply([text("A shorter answer.")])

    recorder = Recorder()
    async with session_with(script, sandbox_root) as (session, fake):
        full = await session.ask("analyse everything", recorder)
    assert isinstance(full, RunFinished) and full.answer == "A shorter answer."
    assert not recorder.of(ToolCallStarted)
    assert [r.system_text == SUMMARY_SYSTEM for r in fake.requests] == [False, True, False]


async def test_a_turn_that_fills_the_window_twice_leaves_a_usable_history(
    sandbox_root: Path,
) -> None:
    """Still full after one compaction: the answer says so, the cut call is answered unrun,
    so a follow-up is accepted."""

    def script(req: ModelRequest) -> Reply:
        if req.system_text == SUMMARY_SYSTEM:
            return Reply([text("The user asked to analyse everything.")])
        if "just the summary" not in req.last_user_text:
            call = run_python("print('never run')")
            return Reply([text("Let me run"), call], stop_reason="model_context_window_exceeded")
        return Reply([text("A shorter answer.")])

    async with session_with(script, sandbox_root) as (session, fake):
        full = await session.ask("analyse everything", Recorder())
        follow = await session.ask("just the summary, then", Recorder())
    assert isinstance(full, RunFinished) and full.stop == "model_context_window_exceeded"
    assert "context window" in full.answer and "new conversation" in full.answer
    assert isinstance(follow, RunFinished) and follow.answer == "A shorter answer."
    unrun = [b for b in fake.requests[-1].merged_messages[-1]["content"] if "tool_use_id" in b]
    assert unrun and unrun[0]["is_error"]


async def test_a_prompt_too_long_for_the_window_fails_with_a_clear_reason(
    sandbox_root: Path,
) -> None:
    """Past the window, the conversation is summarised once and tried again; past it again,
    the run ends with a message saying what to do, never the API's own words."""
    servers: list[FakeAnthropic] = []

    def script(req: ModelRequest) -> Reply:
        if req.system_text == SUMMARY_SYSTEM:
            return Reply([text("The user asked for a lot of output.")])
        if servers[0].context_window is None:  # it fits the first prompt, not what follows
            servers[0].context_window = total_input_tokens(req.body) + 200
        return Reply([run_python("print('x' * 8000)")])

    async with session_with(script, sandbox_root) as (session, fake):
        servers.append(fake)
        result = await session.ask("print a lot", Recorder())
    assert isinstance(result, RunFailed) and result.cause == "model"
    assert "context window" in result.reason and "new conversation" in result.reason
    assert "prompt is too long" not in result.reason
    assert sum(r.system_text == SUMMARY_SYSTEM for r in fake.requests) == 1


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
