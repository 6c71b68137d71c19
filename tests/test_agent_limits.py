"""The bot against the model's sizes: a full context window, a prompt too long for it."""

from __future__ import annotations

from pathlib import Path

from bot.agent.events import RunFailed, RunFinished
from tests.fakes.anthropic_api import FakeAnthropic, ModelRequest, Reply, text
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
    assert "context window" in full.answer and "new thread" in full.answer
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
    assert "context window" in result.reason and "new thread" in result.reason
    assert len(fake.requests) == 2  # a 400 is not retried
