"""The pieces of one run: its audit, the sandbox watched while the model starts, and
failures turned into messages a user may read."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from bot.agent.events import (
    Event,
    ModelTurn,
    RunFailed,
    RunFinished,
    ToolCallFinished,
)
from bot.agent.usage import Usage
from bot.errors import BotError, SandboxError
from bot.sessions.events import Observer, RunView, SessionEvent, ViewFor
from bot.sessions.session import Session
from bot.store.base import Fenced, Store, ToolCallRecord

log = logging.getLogger(__name__)


def error_ref(exc: BaseException, what: str) -> str:
    """Log the details under a short id that the user's message quotes."""
    ref = secrets.token_hex(3)
    log.error("%s [ref %s]", what, ref, exc_info=exc)
    return ref


def failure(exc: Exception) -> RunFailed:
    """A run that raised, as a message for the thread (details only in the log)."""
    if isinstance(exc, BotError):
        reason = f"{exc} (ref {error_ref(exc, 'run failed')})"
    else:
        reason = f"Something went wrong on my side (ref {error_ref(exc, 'run crashed')})."
    cause = "sandbox" if isinstance(exc, SandboxError) else None
    return RunFailed(reason, 0, Usage(), 0.0, cause=cause)


async def ask_watching_sandbox(
    session: Session, question: str, view: RunView, budget_usd: float
) -> RunFinished | RunFailed:
    """Run the question while the sandbox boots; if the sandbox fails, raise that instead."""
    ask = asyncio.create_task(session.ask(question, view, budget_usd))
    ready = asyncio.create_task(session.sandbox())
    try:
        await asyncio.wait([ask, ready], return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and not ready.cancelled() and ready.exception() and not ask.done():
            ask.cancel()
            await asyncio.wait([ask])
            raise ready.exception()  # type: ignore[misc]
        return await ask
    finally:
        for task in (ask, ready):
            task.cancel()
        if ready.done() and not ready.cancelled():
            ready.exception()  # seen here; the run reports it, or the tools did


class ObservedView:
    """A view whose events an observer hears first (metrics count; they do not show)."""

    def __init__(self, view: RunView, observer: Observer) -> None:
        self._view, self._observer = view, observer

    async def __call__(self, event: SessionEvent) -> None:
        self._observer(event)
        await self._view(event)


def observed(view_for: ViewFor, observers: Callable[[], Observer]) -> ViewFor:
    """Each view `view_for` makes, heard first by an observer of its own."""
    return lambda key: ObservedView(view_for(key), observers())


class RecordingView:
    """Records each model turn's usage and each tool call, then passes every event on to
    the thread's view."""

    def __init__(
        self, store: Store, key: str, run_id: str, view: RunView, token: int | None = None
    ) -> None:
        self._store, self._key, self._run_id, self._view = store, key, run_id, view
        self._token = token  # the thread's fencing token: a stale one stops the run here

    async def __call__(self, event: SessionEvent) -> None:
        await self._record(event)
        await self._view(event)

    async def _record(self, event: Event | SessionEvent) -> None:
        match event:
            case ModelTurn():
                await self._store.add_turn(
                    self._key, self._run_id, event.usage.to_dict(), event.cost_usd,
                    time.time(), token=self._token, window_tokens=event.window,
                )  # fmt: skip
            case ToolCallFinished():
                await self._store.add_tool_call(self._key, ToolCallRecord(
                    self._run_id, event.call_id, event.tool, event.language, event.code,
                    event.status, event.exit_code, event.duration_s, event.excerpt, time.time(),
                ), token=self._token)  # fmt: skip
            case RunFinished() if event.figures:
                await self._record_figures(event)

    async def _record_figures(self, event: RunFinished) -> None:
        """Keep with the run where its answer's figures came from, before the answer is
        shown (its Show work button reads them); a store that fails here costs the record,
        not the run."""
        try:
            await self._store.record_figures(self._run_id, figure_records(event))
        except Fenced:
            raise
        except Exception as exc:
            log.warning("could not record the figures of run %s: %s", self._run_id, exc)


def figure_records(result: RunFinished) -> list[dict[str, Any]]:
    """Each figure as the store keeps it: its step (None: in no output) and the call that
    step was; `earlier` is how many questions back that call's run was (0: this run)."""
    return [
        {
            "text": item.figure.text,
            "step": item.step,
            "line": item.line,
            "call_id": item.call_id or None,
            "earlier": item.earlier,
        }
        for item in result.figures
    ]
