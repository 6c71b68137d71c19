"""/healthz and /metrics of a running bot, scraped over HTTP as an orchestrator and
Prometheus would (what feeds the metrics is tested on its own in test_metrics.py)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.agent.pricing import response_cost
from bot.errors import ConfigError
from bot.slack.listen.app import serve
from bot.usage import Usage
from tests.fakes.anthropic import ModelRequest, Reply, http_error, text, tool_use
from tests.redis_server import free_port
from tests.slack_harness import CHANNEL, fake_world, running_bot

ANSWER = "The answer is 42."
LOCAL = {"metrics_host": "127.0.0.1"}
SESSIONS = {"agent_sessions": True}  # else the workspace's refusal of them is a Slack error
SERVICES = ("slack", "anthropic", "sandbox", "store")
TOKEN_FIELDS = {  # the metric's kinds, and the Messages API's usage fields
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_read": "cache_read_input_tokens",
    "cache_write": "cache_creation_input_tokens",
}


def one_tool_call(req: ModelRequest) -> Reply:
    if not req.tool_results():
        return Reply([tool_use("run_code", {"language": "python", "code": "print(6 * 7)"})])
    return Reply([text(ANSWER)])


class Scrape:
    """One /metrics answer, parsed as Prometheus parses it (a malformed line raises)."""

    def __init__(self, body: str) -> None:
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def __call__(self, name: str, **labels: str) -> float:
        return self.samples[(name, frozenset(labels.items()))]


async def get(port: int, path: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        return await client.get(f"http://127.0.0.1:{port}{path}")


async def scrape(port: int) -> Scrape:
    response = await get(port, "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return Scrape(response.text)


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 20) -> None:
    """Poll `check` (an HTTP scrape: nothing to wait on) until it holds."""
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(0.02)


async def test_a_run_moves_the_metrics_and_health_is_ok_once_connected(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    async with running_bot(
        "local", one_tool_call, sandbox_root, monkeypatch, SESSIONS, metrics_port=port, **LOCAL
    ) as h:
        health = await get(port, "/healthz")
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "slack": True, "store": True}
        before = await scrape(port)
        assert before("bot_runs_started_total") == 0
        assert before("bot_runs_in_flight") == 0 and before("bot_sandboxes_live") == 0
        assert before("bot_leases_held") == 0
        assert all(before("bot_errors_total", service=s) == 0 for s in SERVICES)
        assert before("bot_prompt_tokens") == before("bot_context_window_tokens") == 0

        h.model.context_window = 300_000  # what the Models API reports at the first run
        message = await h.slack.post_user_message(CHANNEL, "what is 6 * 7?", mention=True)
        await h.wait_for_text(message["ts"], ANSWER)
        await until(lambda: idle(port))
        after = await scrape(port)

    assert after("bot_runs_started_total") == 1
    assert after("bot_runs_ended_total", outcome="finished") == 1
    assert after("bot_runs_ended_total", outcome="failed") == 0
    assert after("bot_tool_calls_total", tool="run_code", status="ok") == 1
    assert after("bot_questions_queued_total") == after("bot_questions_taken_total") == 1
    assert after("bot_sandboxes_live") == 1
    usage = [reply["usage"] for reply in h.model.replies]
    for kind, field in TOKEN_FIELDS.items():
        assert after("bot_model_tokens_total", kind=kind) == sum(u.get(field, 0) for u in usage)
    assert after("bot_model_tokens_total", kind="output") > 0
    cost = sum(response_cost(reply["model"], usage_of(reply["usage"])) for reply in h.model.replies)
    assert cost > 0 and after("bot_model_cost_usd_total") == pytest.approx(cost)
    assert all(after("bot_errors_total", service=s) == 0 for s in SERVICES)
    last = usage_of(usage[-1]).prompt_tokens
    assert last > usage_of(usage[0]).prompt_tokens  # the latest turn's, not the first's
    assert after("bot_prompt_tokens") == last
    assert after("bot_context_window_tokens") == 300_000


def usage_of(fields: dict[str, Any]) -> Usage:
    """A reply's usage, its cache writes all at the 5-minute price (the bot asks for no other)."""
    return Usage(
        input_tokens=fields.get("input_tokens", 0),
        output_tokens=fields.get("output_tokens", 0),
        cache_write_5m_tokens=fields.get("cache_creation_input_tokens", 0),
        cache_read_tokens=fields.get("cache_read_input_tokens", 0),
    )


async def idle(port: int) -> bool:
    return (await scrape(port))("bot_runs_in_flight") == 0


async def test_healthz_is_503_until_slack_connects_and_once_shutdown_begins(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = asyncio.Event()

    async def held(req: ModelRequest) -> Reply:
        await release.wait()  # the run stays in flight until the test lets it go
        return Reply([text(ANSWER)])

    port = free_port()
    async with fake_world("local", held, sandbox_root, monkeypatch, **LOCAL) as h:
        # Slack asks the start-up check, then the first connection attempt, to wait a
        # second (429s); the check lets a busy Slack pass, the connection waits.
        h.slack.fail_next("apps.connections.open", 2, status=429, retry_after=1)
        stop = asyncio.Event()
        task = asyncio.create_task(
            serve(h.settings.model_copy(update={"metrics_port": port}), stop)
        )
        try:
            first = await first_answer(port, task)
            assert first.status_code == 503 and first.json()["slack"] is False
            assert h.slack.connections == 0
            await until(lambda: healthz_is(port, 200))
            assert h.slack.connections == 1
            assert (await scrape(port))("bot_errors_total", service="slack") == 1  # the 429

            message = await h.slack.post_user_message(CHANNEL, "hold on", mention=True)
            await until(lambda: in_flight(port, 1))
            stop.set()
            await until(lambda: healthz_is(port, 503))
            assert (await get(port, "/healthz")).json() == {"status": "draining"}
            assert not task.done()  # the run still has its grace period
        finally:
            stop.set()
            release.set()
            await asyncio.wait_for(task, 30)
        assert ANSWER in h.texts(message["ts"])  # it finished within the grace period
        with pytest.raises(httpx.ConnectError):  # and the server is gone with the bot
            await get(port, "/healthz")


async def first_answer(port: int, task: asyncio.Task[None]) -> httpx.Response:
    """The first answer of /healthz, once its server is listening."""
    async with asyncio.timeout(15):
        while True:
            if task.done():
                task.result()
            try:
                return await get(port, "/healthz")
            except httpx.ConnectError:
                await asyncio.sleep(0.01)


async def healthz_is(port: int, status: int) -> bool:
    return (await get(port, "/healthz")).status_code == status


async def in_flight(port: int, runs: int) -> bool:
    return (await scrape(port))("bot_runs_in_flight") == runs


async def test_failures_are_counted_by_service(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    async with running_bot(
        "local", one_tool_call, sandbox_root, monkeypatch, SESSIONS, metrics_port=port, **LOCAL,
        slack_ui="classic",  # its :eyes: reaction, which Slack refuses
    ) as h:  # fmt: skip
        h.slack.fail_next("reactions.add", 1, status=200, error="too_many_reactions")
        h.model.fail_next(1, http_error(401, "authentication_error"))
        message = await h.slack.post_user_message(CHANNEL, "what is 6 * 7?", mention=True)
        await h.wait_for_text(message["ts"], "ANTHROPIC_API_KEY")
        await until(lambda: idle(port))
        seen = await scrape(port)
    assert seen("bot_errors_total", service="slack") == 1
    assert seen("bot_errors_total", service="anthropic") == 1
    assert seen("bot_errors_total", service="sandbox") == 0
    assert seen("bot_runs_ended_total", outcome="failed") == 1


async def test_a_sandbox_that_never_becomes_ready_is_a_sandbox_error(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    overrides: dict[str, Any] = {"buddy_ready_timeout_s": 1, "metrics_port": port, **LOCAL}
    async with running_bot("buddy", one_tool_call, sandbox_root, monkeypatch, **overrides) as h:
        assert h.buddy is not None
        h.buddy.boot_delay_s = 30
        message = await h.slack.post_user_message(CHANNEL, "go", mention=True)
        await h.wait_for_text(message["ts"], "was not ready after", timeout=30)
        await until(lambda: idle(port))
        seen = await scrape(port)
    assert seen("bot_errors_total", service="sandbox") == 1
    assert seen("bot_errors_total", service="anthropic") == 0
    assert seen("bot_runs_ended_total", outcome="failed") == 1


async def test_a_port_in_use_is_a_configuration_error(
    sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with fake_world("local", one_tool_call, sandbox_root, monkeypatch, **LOCAL) as h:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            settings = h.settings.model_copy(update={"metrics_port": taken.getsockname()[1]})
            with pytest.raises(ConfigError, match="METRICS_PORT"):
                await asyncio.wait_for(serve(settings, asyncio.Event()), 15)
        assert h.slack.connections == 0
