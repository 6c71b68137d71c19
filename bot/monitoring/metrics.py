"""What one bot process counts, and the observer that counts the engine's events.

Each `Metrics` has a registry of its own, not prometheus_client's global one, so two bots in
one process (the tests) never share a counter. Every label takes values from a short fixed
list: no thread keys, user ids or free text.
"""

from __future__ import annotations

from typing import Literal, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from bot.agent.tools import TOOLS
from bot.run_events import ContextTrimmed, ModelTurn, RunFailed, RunFinished, ToolCallFinished
from bot.sessions.events import (
    Observer,
    RunInterrupted,
    RunStarted,
    RunStopped,
    SessionEvent,
)
from bot.usage import Usage

Service = Literal["slack", "anthropic", "sandbox", "store"]
SERVICES: tuple[Service, ...] = ("slack", "anthropic", "sandbox", "store")
OUTCOMES = ("finished", "failed", "stopped", "interrupted")
TOOL_STATUSES = ("ok", "error", "timeout", "killed", "running", "invalid")
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
OTHER = "other"  # a tool name or status outside the known ones (the model may invent tools)
CAUSES: dict[str, Service] = {"model": "anthropic", "sandbox": "sandbox"}


class Activity(Protocol):
    """What the engine reports about this process's work (read at each scrape)."""

    @property
    def runs_in_flight(self) -> int: ...

    @property
    def live_sandboxes(self) -> int: ...


class LeaseHolder(Protocol):
    @property
    def held(self) -> int: ...


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, labels, registry=self.registry)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, registry=self.registry)

        self.runs_in_flight = gauge("bot_runs_in_flight", "Runs going in this process.")
        self.runs_started = counter("bot_runs_started", "Runs started.")
        self.runs_ended = counter("bot_runs_ended", "Runs ended, by outcome.", "outcome")
        self.queued = counter("bot_questions_queued", "Questions queued for a thread's run.")
        self.taken = counter("bot_questions_taken", "Queued questions taken into a run.")
        self.leases = gauge("bot_leases_held", "Thread leases this process holds.")
        self.sandboxes = gauge("bot_sandboxes_live", "Sandboxes this process's sessions hold.")
        self.tool_calls = counter(
            "bot_tool_calls", "Tool calls finished, by tool and status.", "tool", "status"
        )
        self.errors = counter("bot_errors", "Failures met in a service.", "service")
        self.tokens = counter("bot_model_tokens", "Model tokens, by kind.", "kind")
        self.cost = counter("bot_model_cost_usd", "Model cost at list price, in USD.")
        self.prompt = gauge("bot_prompt_tokens", "Prompt size of this process's latest turn.")
        self.window = gauge("bot_context_window_tokens", "The model's context window.")
        self.context_edits = counter(
            "bot_context_edits",
            "Long conversations cleared or compacted, by kind and by whom.",
            "kind",
            "by",
        )
        # Every series of a bounded label exists from the start, so a rate over it is 0,
        # not missing, until the first event.
        for metric, values in (
            (self.runs_ended, OUTCOMES),
            (self.errors, SERVICES),
            (self.tokens, TOKEN_KINDS),
        ):
            for value in values:
                metric.labels(value)

    def watch(self, activity: Activity) -> None:
        """Read runs in flight and live sandboxes from `activity` at every scrape."""
        self.runs_in_flight.set_function(lambda: activity.runs_in_flight)
        self.sandboxes.set_function(lambda: activity.live_sandboxes)

    def watch_leases(self, holder: LeaseHolder) -> None:
        """Read the thread leases this process holds at every scrape."""
        self.leases.set_function(lambda: holder.held)

    def error(self, service: Service) -> None:
        if service not in SERVICES:
            raise ValueError(f"unknown service {service!r}")
        self.errors.labels(service).inc()

    def counter(self) -> Observer:
        """What counts one view's events (the engine asks for one per view it makes)."""
        return _RunCounter(self)

    def count_usage(self, usage: Usage, cost_usd: float | None) -> None:
        for kind, tokens in zip(TOKEN_KINDS, _token_counts(usage), strict=True):
            if tokens:
                self.tokens.labels(kind).inc(tokens)
        if cost_usd:  # None: the model is not in the price table
            self.cost.inc(cost_usd)

    def count_prompt(self, prompt_tokens: int, window: int | None) -> None:
        self.prompt.set(prompt_tokens)
        if window:  # None: the agent was given no limits
            self.window.set(window)

    def count_tool_call(self, event: ToolCallFinished) -> None:
        tool = event.tool if event.tool in TOOLS else OTHER
        status = event.status if event.status in TOOL_STATUSES else OTHER
        self.tool_calls.labels(tool, status).inc()


class _RunCounter:
    """Counts what one run's view is shown; the engine calls it before the view, so a view
    that fails loses no count."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics
        self._ended = False

    def __call__(self, event: SessionEvent) -> None:
        self._count(event)

    def _count(self, event: SessionEvent) -> None:
        metrics = self._metrics
        match event:
            case RunStarted():
                metrics.runs_started.inc()
            case ModelTurn():
                metrics.count_usage(event.usage, event.cost_usd)
                if event.purpose == "answer":  # a summary's prompt is not the thread's size
                    metrics.count_prompt(event.usage.prompt_tokens, event.window)
            case ContextTrimmed():
                metrics.context_edits.labels(event.kind, event.by).inc()
            case ToolCallFinished():
                metrics.count_tool_call(event)
            case RunFailed(cause=cause) if cause in CAUSES:
                metrics.error(CAUSES[cause])
        outcome = _outcome(event)
        if outcome and not self._ended:  # a Stop racing the end: the first one counts
            self._ended = True
            metrics.runs_ended.labels(outcome).inc()


def _outcome(event: SessionEvent) -> str | None:
    """How a run of this process ended, if `event` says it did. A restart's note about a
    run that a crash cut off is not one: that run was another process's."""
    match event:
        case RunFinished():
            return "finished"
        case RunFailed():
            return "failed"
        case RunStopped():
            return "stopped"
        case RunInterrupted(why="shutdown"):
            return "interrupted"
    return None


def _token_counts(usage: Usage) -> tuple[int, int, int, int]:
    """In the order of TOKEN_KINDS."""
    return (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
