"""The model's limits: read from the Models API, else from the published table, else a
conservative default; `max_tokens` kept within the model's cap; each turn's prompt size and
window reported."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import anthropic
import pytest

from bot.agent.model_limits import DEFAULT, Limits, ModelLimits, fetch_limits
from bot.run_events import ModelTurn, RunFinished
from tests.agent.test_agent_loop import session_with
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text
from tests.redis_server import free_port
from tests.support import Recorder


def say(answer: str):
    return lambda req: Reply([text(answer)])


async def test_the_limits_come_from_the_models_api() -> None:
    async with (
        FakeAnthropic(say("-"), context_window=50_000) as api,
        api.client() as client,
    ):
        limits = await fetch_limits(client, "claude-sonnet-4-6")
    assert limits == Limits(50_000, 64_000, "api")
    assert api.model_lookups == ["claude-sonnet-4-6"]


async def test_without_the_models_route_the_published_figures_are_used() -> None:
    async with (
        FakeAnthropic(say("-"), context_window=50_000, models_api=False) as api,
        api.client() as client,
    ):
        assert await fetch_limits(client, "claude-haiku-4-5") == Limits(200_000, 64_000)
        assert await fetch_limits(client, "claude-opus-5-5") == Limits(1_000_000, 128_000)
    assert api.model_lookups == []


async def test_a_server_that_does_not_answer_falls_back_to_the_table() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    async with anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=url) as client:
        assert await fetch_limits(client, "claude-sonnet-4-6") == Limits(1_000_000, 64_000)


async def test_an_unknown_model_gets_the_default_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.agent.model_limits")
    async with (
        FakeAnthropic(say("-"), models=["llama3.1"], models_api=False) as api,
        api.client() as client,
    ):
        limits = ModelLimits(client, "llama3.1")
        got = await asyncio.gather(*(limits.get() for _ in range(5)))
    assert got == [DEFAULT] * 5
    assert DEFAULT.context_window == 200_000 and DEFAULT.max_output == 64_000
    unknown = [r for r in caplog.records if "unknown" in r.getMessage()]
    assert len(unknown) == 1


async def test_max_output_above_the_models_cap_is_sent_as_the_cap(
    sandbox_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fake refuses max_tokens above a model's cap with a 400, as the API does."""
    caplog.set_level(logging.WARNING, logger="bot.agent.model_limits")
    settings = {"anthropic_model": "claude-haiku-4-5", "max_output_tokens": 100_000}
    async with session_with(say("fine"), sandbox_root, **settings) as (session, fake):
        first = await session.ask("hi", Recorder())
        second = await session.ask("again", Recorder())
    assert isinstance(first, RunFinished) and first.answer == "fine"
    assert isinstance(second, RunFinished)
    assert [r.body["max_tokens"] for r in fake.requests] == [64_000, 64_000]
    assert fake.model_lookups == ["claude-haiku-4-5"]  # once per process
    assert len([r for r in caplog.records if "MAX_OUTPUT_TOKENS" in r.getMessage()]) == 1


async def test_max_output_below_the_cap_is_sent_as_set(sandbox_root: Path) -> None:
    settings = {"anthropic_model": "claude-haiku-4-5", "max_output_tokens": 8_000}
    async with session_with(say("fine"), sandbox_root, **settings) as (session, fake):
        assert isinstance(await session.ask("hi", Recorder()), RunFinished)
    assert fake.requests[0].body["max_tokens"] == 8_000


async def test_each_turn_reports_its_prompt_size_and_the_window(sandbox_root: Path) -> None:
    def script(req: ModelRequest) -> Reply:
        if req.turn == 0:
            return Reply([text("step")], stop_reason="pause_turn")
        return Reply([text("done")])

    recorder = Recorder()
    async with session_with(script, sandbox_root, context_window=300_000) as (session, fake):
        assert isinstance(await session.ask("hi", recorder), RunFinished)
    turns = recorder.of(ModelTurn)
    assert [t.window for t in turns] == [300_000, 300_000]
    sizes = [
        u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
        for u in (reply["usage"] for reply in fake.replies)
    ]
    assert [t.usage.prompt_tokens for t in turns] == sizes
    assert sizes[1] > sizes[0] > 0
