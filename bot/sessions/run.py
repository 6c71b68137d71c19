"""The pieces of one run: its audit, the sandbox watched while the model starts, and
failures turned into messages a user may read."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

from bot.errors import BotError, SandboxError
from bot.run_events import (
    Event,
    ModelTurn,
    RunFailed,
    RunFinished,
    ToolCallFinished,
)
from bot.sessions.events import (
    Observer,
    OutputsReady,
    RunInterrupted,
    RunStarted,
    RunStopped,
    RunView,
    SessionEvent,
    ViewFor,
)
from bot.sessions.retry import Backoff
from bot.sessions.session import Session
from bot.sessions.thread import RunResult
from bot.store.base import Fenced, RunOutcome, RunStore, ToolCallRecord
from bot.usage import Usage

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
    if isinstance(exc, SandboxError):
        return RunFailed(reason, 0, Usage(), 0.0, cause="sandbox")
    return RunFailed(reason, 0, Usage(), 0.0)


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
            raise error_of(ready)
        return await ask
    finally:
        for task in (ask, ready):
            task.cancel()
        if ready.done() and not ready.cancelled():
            ready.exception()  # seen here; the run reports it, or the tools did


class Accepting(Protocol):
    accepting: bool  # False once shutting down


async def execute(
    session: Session,
    question: str,
    view: RecordingView,
    budget: float,
    run_id: str,
    user: str,
    engine: Accepting,
) -> RunResult:
    """One run, from its start to its answer or failure, told to `view`; cancelled by a
    Stop (or a shutdown, when the engine no longer accepts work)."""
    await view(RunStarted(run_id, question, budget, user))
    try:
        result = await ask_watching_sandbox(session, question, view, budget)
        await view(OutputsReady(session.outputs))
        return result
    except Fenced:
        raise  # not a failure to tell: the thread is another replica's now
    except asyncio.CancelledError:
        if engine.accepting:
            run = await view.store.get_run(run_id)
            await view(RunStopped(run.stopped_by if run else None))
        else:
            await view(RunInterrupted("shutdown"))
        raise
    except Exception as exc:
        failed = failure(exc)
        await view(failed)
        return failed


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
        self, store: RunStore, key: str, run_id: str, view: RunView, token: int | None = None
    ) -> None:
        self.store, self._key, self._run_id, self._view = store, key, run_id, view
        self._token = token  # the thread's fencing token: a stale one stops the run here

    async def __call__(self, event: SessionEvent) -> None:
        await self._record(event)
        await self._view(event)

    async def _record(self, event: Event | SessionEvent) -> None:
        match event:
            case ModelTurn():
                await self.store.add_turn(
                    self._key, self._run_id, event.usage.to_dict(), event.cost_usd,
                    time.time(), token=self._token, window_tokens=event.window,
                )  # fmt: skip
            case ToolCallFinished():
                await self.store.add_tool_call(self._key, ToolCallRecord(
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
            records = figure_records(event)
            await self.store.record_figures(self._run_id, records, token=self._token)
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


async def end_run(
    store: RunStore,
    run_id: str,
    outcome: RunOutcome,
    token: int | None,
    retry: Backoff,
    clock: Callable[[], float],
) -> None:
    """Record the run's end, retried through a store blip. If it still cannot be written
    the run stays in flight in the store; the reaper ends it (no task holds it here)."""
    for delay in retry.delays():
        try:
            await store.end_run(run_id, outcome, clock(), token=token)
            return
        except Fenced:
            raise
        except Exception as exc:  # the store's own and its driver's errors alike
            if delay is None:
                log.error("could not record the end of run %s: %s", run_id, exc)
                return
            log.warning("recording the end of run %s failed, retrying: %s", run_id, exc)
            await asyncio.sleep(delay)


def refused(task: asyncio.Task[RunResult]) -> bool:
    """Whether the run ended on a write the store refused (its thread was taken over)."""
    return not task.cancelled() and isinstance(task.exception(), Fenced)


def outcome_of(task: asyncio.Task[RunResult], accepting: bool) -> tuple[RunResult, RunOutcome]:
    if task.cancelled():
        return None, "stopped" if accepting else "interrupted"
    if task.exception():
        log.error("a run failed", exc_info=task.exception())
        return None, "failed"
    result = task.result()
    return result, "finished" if isinstance(result, RunFinished) else "failed"


def error_of(task: asyncio.Future[Any]) -> BaseException:
    """The exception a finished, uncancelled task raised (the caller checked it has one)."""
    error = task.exception()
    assert error is not None
    return error
