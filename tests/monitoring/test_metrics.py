"""What feeds the metrics, without a bot around it: the observer of the engine's events,
the store wrapper, and the settings. The bot scraped over HTTP is in test_monitoring.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.coord import LocalCoordinator
from bot.errors import ConfigError
from bot.monitoring import Metrics, metered
from bot.run_events import ModelTurn, RunFailed, RunFinished, ToolCallFinished
from bot.sessions.events import RunInterrupted, RunStarted, RunStopped, SessionEvent
from bot.sessions.run import observed
from bot.settings import load_settings
from bot.store import NotFound, SqliteStore, Store, StoreError
from bot.usage import Usage
from tests.store.test_store import session


def test_metrics_port_settings() -> None:
    assert load_settings(_env_file=None, metrics_port=" ").metrics_port is None
    assert load_settings(_env_file=None).metrics_port is None
    assert load_settings(_env_file=None).metrics_host == "0.0.0.0"
    assert load_settings(_env_file=None, metrics_port="9102").metrics_port == 9102
    for bad in ("0", "65536", "http"):
        with pytest.raises(ConfigError, match="METRICS_PORT"):
            load_settings(_env_file=None, metrics_port=bad)


class Shown:
    """A thread's view that keeps what it is shown, or fails after keeping it."""

    def __init__(self, fail: bool = False) -> None:
        self.events: list[SessionEvent] = []
        self.fail = fail

    async def __call__(self, event: SessionEvent) -> None:
        self.events.append(event)
        if self.fail:
            raise RuntimeError("Slack is down")


async def test_the_observer_counts_each_event_once_and_passes_it_on() -> None:
    """Each view the engine makes is heard by a fresh counter first (`Engine(observers=)`)."""
    metrics = Metrics()
    shown = Shown()
    views = [shown, Shown(fail=True), Shown()]
    view_for = observed(lambda key: views.pop(0), metrics.counter)
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=100, cache_write_5m_tokens=7)
    first, failing, restart_note = view_for("k"), view_for("k"), view_for("k")

    events: list[SessionEvent] = [
        RunStarted("r1", "q", 1.0),
        ModelTurn(1, usage, 0.25),
        ToolCallFinished("c1", "run_code", "ok", 0, 0.1, ""),
        ToolCallFinished("c2", "made_up_tool", "weird", None, 0.0, ""),
        RunFinished("done", 1, usage, 0.25, "end_turn"),
        RunStopped("U1"),  # a Stop that raced the end: the run ended once
    ]
    for event in events:
        await first(event)
    with pytest.raises(RuntimeError):  # a view that fails still had its event counted
        await failing(RunFailed("model down", 0, Usage(), None, cause="model"))
    await restart_note(RunInterrupted("restart"))  # another process's run

    value = metrics.registry.get_sample_value
    assert shown.events == events
    assert value("bot_runs_started_total") == 1
    assert value("bot_runs_ended_total", {"outcome": "finished"}) == 1
    assert value("bot_runs_ended_total", {"outcome": "stopped"}) == 0
    assert value("bot_runs_ended_total", {"outcome": "failed"}) == 1
    assert value("bot_runs_ended_total", {"outcome": "interrupted"}) == 0
    assert value("bot_errors_total", {"service": "anthropic"}) == 1
    assert value("bot_tool_calls_total", {"tool": "run_code", "status": "ok"}) == 1
    assert value("bot_tool_calls_total", {"tool": "other", "status": "other"}) == 1
    tokens = {k: value("bot_model_tokens_total", {"kind": k}) for k in ("input", "output")}
    assert tokens == {"input": 10, "output": 5}
    assert value("bot_model_tokens_total", {"kind": "cache_read"}) == 100
    assert value("bot_model_tokens_total", {"kind": "cache_write"}) == 7
    assert value("bot_model_cost_usd_total") == 0.25
    holder = LocalCoordinator()
    metrics.watch_leases(holder)
    for key in ("a", "b", "c"):
        await holder.claim(key)
    assert value("bot_leases_held") == 3


async def test_two_bots_in_one_process_count_apart() -> None:
    ours, theirs = Metrics(), Metrics()
    ours.error("store")
    assert ours.registry.get_sample_value("bot_errors_total", {"service": "store"}) == 1
    assert theirs.registry.get_sample_value("bot_errors_total", {"service": "store"}) == 0


async def test_the_store_wrapper_counts_failures_and_queued_questions(tmp_path: Path) -> None:
    metrics = Metrics()
    store = metered(SqliteStore(tmp_path / "store.db"), metrics)
    assert isinstance(store, Store)
    with pytest.raises(StoreError):  # not open yet
        await store.ping()
    await store.open()
    try:
        with pytest.raises(NotFound):  # a write about no session: the caller's mistake
            await store.enqueue("T:C:1", "q", "U1", 1.0)
        await store.save_session(session("T:C:1"))
        for n in range(3):
            await store.enqueue("T:C:1", f"q{n}", "U1", float(n))
        assert len(await store.take_queued("T:C:1")) == 3
        await store.ping()
    finally:
        await store.close()
    value = metrics.registry.get_sample_value
    assert value("bot_errors_total", {"service": "store"}) == 1
    assert value("bot_questions_queued_total") == 3
    assert value("bot_questions_taken_total") == 3
