"""Threads longer than the model's context: old tool results cleared, the conversation
compacted, a prompt refused as too long compacted once and retried; all against a fake
Messages API with a small window, with and without its context-management betas."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.agent.endings import FULL_WINDOW_NOTE
from bot.agent.trim import CLEARED_MARK
from bot.compose import Runtime
from bot.run_events import ContextTrimmed, ModelTurn, RunFailed, RunFinished
from bot.sessions.session import Session
from bot.store.base import Store
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.long_thread import Analyst, current_question, figure, question, recall
from tests.redis_server import redis_server
from tests.sessions.test_engine import Views
from tests.support import Recorder, file_chunks, runtime_for, settings_for

KEY = "T1:C1:200.1"
WINDOW = 20_000


@asynccontextmanager
async def thread(
    script: Callable, root: Path, *, window: int = WINDOW, fake: dict | None = None, **settings: Any
) -> AsyncIterator[tuple[Session, FakeAnthropic]]:
    async with FakeAnthropic(script, context_window=window, **(fake or {})) as api:
        runtime = runtime_for(api.base_url, root, **settings)
        session = runtime.sessions.new("long-thread")
        try:
            yield session, api
        finally:
            await session.close()
            await runtime.close()


def largest_prompt(api: FakeAnthropic) -> int:
    """The largest prompt the model answered (after any edits the fake made); a prompt over
    the window is refused, and the bot must not stop there."""
    usage = [r["usage"] for r in api.replies]
    return max(
        u["input_tokens"]
        + u.get("cache_creation_input_tokens", 0)
        + u.get("cache_read_input_tokens", 0)
        for u in usage
    )


async def ask_all(session: Session, questions: list[str]) -> tuple[list[Any], Recorder]:
    recorder = Recorder()
    return [await session.ask(q, recorder) for q in questions], recorder


@pytest.mark.parametrize(
    ("editing", "endpoint", "edits_sent"),
    [
        ("client", "apply", False),  # the bot's own, even where the API could
        ("auto", "apply", True),  # the API's betas as the guard within a run
        ("auto", "refuse", False),  # an endpoint that refuses them
        ("auto", "ignore", False),  # one that ignores them
    ],
)
async def test_forty_questions_on_a_small_window_are_all_answered(
    sandbox_root: Path, editing: str, endpoint: str, edits_sent: bool
) -> None:
    script = Analyst(answer_chars=150)
    fake = {"context_editing": endpoint}
    async with thread(script, sandbox_root, fake=fake, context_editing=editing) as (session, api):
        results, recorder = await ask_all(session, [question(n) for n in range(1, 41)])
        later, _ = await ask_all(session, [recall(41, of=3)])
    for n, result in enumerate(results, start=1):
        assert isinstance(result, RunFinished), (n, result)
        assert f"A{n}: the total is {figure(n)}." in result.answer
    # The figure of question 3 was still known at question 41, from the summary.
    assert later[0].answer == f"At question 3 the total was {figure(3)}."
    assert largest_prompt(api) <= WINDOW
    # Between questions the bot clears (cache-friendly) and, with a window this small (below
    # the API's 50,000-token compaction minimum), compacts.
    # Within a run, the API's own clearing may step in where it is offered.
    trims = {(t.kind, t.by) for t in recorder.of(ContextTrimmed)} - {("cleared", "server")}
    assert trims == {("cleared", "bot"), ("compacted", "bot")}
    assert script.summaries >= 1
    assert any(t.purpose == "compaction" for t in recorder.of(ModelTurn))  # paid for
    assert any("context_management" in r.body for r in api.requests[-3:]) == edits_sent


@pytest.mark.parametrize("endpoint", ["apply", "ignore"])
async def test_one_long_run_is_cleared_by_the_api_where_it_can_else_compacted(
    sandbox_root: Path, endpoint: str
) -> None:
    script = Analyst(steps=10)  # 10 steps of 8 k characters: past the window in one run
    fake = {"context_editing": endpoint}
    config = {"context_editing": "auto", "tool_output_chars": 16_000}
    async with thread(script, sandbox_root, fake=fake, **config) as (session, api):
        results, recorder = await ask_all(session, [question(1), recall(2, of=1)])
    assert isinstance(results[0], RunFinished) and "A1: the total is" in results[0].answer
    assert results[1].answer == f"At question 1 the total was {figure(1)}."
    assert largest_prompt(api) <= WINDOW
    by = {(t.kind, t.by) for t in recorder.of(ContextTrimmed)}
    if endpoint == "apply":
        assert ("cleared", "server") in by and script.summaries == 0
    else:  # the prompt was refused as too long, compacted once, and the run went on
        assert by == {("compacted", "bot")} and script.summaries == 1


async def test_the_apis_compaction_is_sent_back_and_what_it_replaced_dropped(
    sandbox_root: Path,
) -> None:
    script = Analyst(answer_chars=2000)
    limits = {"context_clear_tokens": 20_000, "context_compact_tokens": 50_000}
    async with thread(script, sandbox_root, window=80_000, **limits) as (session, api):
        results, recorder = await ask_all(session, [question(n) for n in range(1, 41)])
        later, _ = await ask_all(session, [recall(41, of=3)])
        history = session.agent.history
    assert all(isinstance(r, RunFinished) for r in results)
    assert later[0].answer == f"At question 3 the total was {figure(3)}."
    trims = recorder.of(ContextTrimmed)
    assert ("compacted", "server") in {(t.kind, t.by) for t in trims}
    assert script.summaries == 0  # the API wrote the summary
    assert any(r.compaction for r in api.requests)
    # Once compacted, the saved history starts at the compaction block.
    assert history[1]["content"][0]["type"] == "compaction"
    assert any(t.purpose == "compaction" for t in recorder.of(ModelTurn))  # its cost counted
    assert largest_prompt(api) <= 80_000


async def test_cleared_results_keep_the_code_and_a_line_and_the_kernel_note(
    sandbox_root: Path,
) -> None:
    config = {"window": 30_000, "context_editing": "client"}
    async with thread(Analyst(), sandbox_root, **config) as (session, api):
        _, recorder = await ask_all(session, [question(n) for n in range(1, 17)])
        history = session.agent.history
    assert [t.kind for t in recorder.of(ContextTrimmed)] == ["cleared"]
    results = [
        b
        for m in history
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    cleared = [r for r in results if r["content"].startswith(CLEARED_MARK)]
    assert 0 < len(cleared) <= len(results) - 3  # the latest three stay whole
    assert "xxxxxxxx" in cleared[0]["content"] and len(cleared[0]["content"]) < 800
    assert "globals()" in cleared[0]["content"]  # how to list what the kernel still holds
    calls = [b for m in history if m["role"] == "assistant" for b in m["content"]]
    assert sum(b["type"] == "tool_use" for b in calls) == len(results)  # the code stays
    # Clearing happens in steps, so the prompt cache is not rewritten at every question.
    cleared_at = [i for i, r in enumerate(api.requests) if CLEARED_MARK in str(r.messages)]
    assert cleared_at and len(api.requests) - cleared_at[0] > 2


async def test_a_prompt_too_long_is_compacted_once_and_told_the_second_time(
    sandbox_root: Path,
) -> None:
    script = Analyst()
    async with thread(script, sandbox_root, context_editing="client") as (session, _):
        await ask_all(session, [question(n) for n in range(1, 4)])
        script.too_long = {4: 1}
        recovered, recorder = await ask_all(session, [question(4)])
        script.too_long = {5: 2}
        failed, _ = await ask_all(session, [question(5)])
        after, _ = await ask_all(session, [recall(6, of=2)])
    assert isinstance(recovered[0], RunFinished) and "A4: the total is" in recovered[0].answer
    assert [t.kind for t in recorder.of(ContextTrimmed)] == ["compacted"]
    assert isinstance(failed[0], RunFailed) and failed[0].reason == FULL_WINDOW_NOTE
    assert "start a new conversation" in failed[0].reason.lower()
    assert "400" not in failed[0].reason and "prompt is too long" not in failed[0].reason
    # The thread still answers, from the summary.
    assert after[0].answer == f"At question 2 the total was {figure(2)}."


async def test_a_full_window_stop_is_compacted_and_the_question_answered(
    sandbox_root: Path,
) -> None:
    analyst, cut = Analyst(), []

    def script(req):
        if current_question(req) == 3 and not cut and req.tool_results():
            cut.append(req)
            return Reply([text("The totals ar")], stop_reason="model_context_window_exceeded")
        return analyst(req)

    async with thread(script, sandbox_root, context_editing="client") as (session, _):
        results, recorder = await ask_all(session, [question(n) for n in range(1, 4)])
    assert cut and isinstance(results[2], RunFinished)
    assert "A3: the total is" in results[2].answer and "The totals ar" not in results[2].answer
    assert [t.kind for t in recorder.of(ContextTrimmed)] == ["compacted"]


@asynccontextmanager
async def engine_with(
    store: Store, api: FakeAnthropic, root: Path, **settings: Any
) -> AsyncIterator[tuple[Any, Views]]:
    runtime = Runtime.from_settings(settings_for(api.base_url, root, **settings))
    views = Views()
    engine = runtime.engine(store, views, lambda source: file_chunks)
    try:
        yield engine, views
    finally:
        await engine.shutdown(0)
        await engine.close(KEY)
        await runtime.close()


@asynccontextmanager
async def store_on(kind: str, folder: Path) -> AsyncIterator[Callable[[], Store]]:
    if kind == "sqlite":
        yield lambda: SqliteStore(folder / "store.db")
        return
    async with redis_server(folder / "redis") as server:
        yield lambda: RedisStore(server.url)


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_the_compacted_thread_goes_on_after_a_restart(
    sandbox_root: Path, tmp_path: Path, kind: str
) -> None:
    async with (
        store_on(kind, tmp_path) as new_store,
        FakeAnthropic(Analyst(answer_chars=150), context_window=16_000) as api,
    ):
        first = new_store()
        await first.open()
        async with engine_with(first, api, sandbox_root, context_editing="client") as (engine, _):
            for n in range(1, 25):
                result = await (await engine.ask(KEY, question(n), user="U1"))
                assert isinstance(result, RunFinished), (n, result)
        await first.close()
        # Another process (or replica) takes the thread over from the store alone.
        second = new_store()
        await second.open()
        async with engine_with(second, api, sandbox_root, context_editing="client") as (engine, _):
            answer = await (await engine.ask(KEY, recall(25, of=3), user="U1"))
            archived = await second.archived_history(KEY)
            history = await second.load_history(KEY)
        await second.close()
    assert isinstance(answer, RunFinished)
    assert answer.answer == f"At question 3 the total was {figure(3)}."
    # Nothing is lost: what clearing and compaction replaced is archived, word for word.
    assert {a["reason"] for a in archived} == {"cleared by bot", "compacted by bot"}
    first_output = [
        b["content"]
        for a in archived
        for m in a["messages"]
        if m["role"] == "user"
        for b in m["content"]
        if b.get("type") == "tool_result" and "total 1:" in b["content"]
    ]
    assert first_output and first_output[0].count("x") > 3000  # whole, as the model got it
    assert history[0]["content"][0]["text"].startswith("Summary of the conversation so far")
