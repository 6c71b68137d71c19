"""The durable store: round trips, migrations, concurrency, and a process killed mid-write.

The tests of the Store's behaviour run on both backends (a SQLite file, a private
redis-server); those about SQLite's file, schema and crash recovery run on SQLite only."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from bot.store import (
    Fenced,
    FileRecord,
    NotFound,
    SessionRecord,
    SqliteStore,
    Store,
    StoreError,
    ToolCallRecord,
)
from bot.store.redis_store import RedisStore
from bot.store.sqlite_schema import MIGRATIONS, connect, migrate, schema_version, transaction
from tests.redis_server import redis_server
from tests.support import CHECKOUT

ROOT = CHECKOUT


def session(key: str = "T1:C1:1.0", *, last: float = 100.0, **changes: object) -> SessionRecord:
    record = SessionRecord(
        key=key,
        sandbox_id="sb-1",
        state="active",
        repo_url=None,
        created_at=50.0,
        last_activity=last,
    )
    return dataclasses.replace(record, **changes)


def file_record(n: int) -> FileRecord:
    return FileRecord(
        slack_file_id=f"F{n}",
        name=f"data-{n}.csv",
        size=1000 + n,
        sha256=f"{n:064x}",
        sandbox_path=f"/buddy/data/data-{n}.csv",
        source={"id": f"F{n}", "url_private": f"https://files/F{n}", "meta": {"n": [n, None]}},
    )


def tool_call(run_id: str, n: int) -> ToolCallRecord:
    return ToolCallRecord(
        run_id=run_id,
        call_id=f"toolu_{n}",
        tool="run_code",
        language="python" if n % 2 else None,
        code=f"print({n})",
        status="ok" if n % 2 else "error",
        exit_code=0 if n % 2 else None,
        duration_s=0.5 * n,
        excerpt=f"{n}\n",
        at=200.0 + n,
    )


@pytest.fixture(params=["sqlite", "redis"])
async def new_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Callable[[], Store]]:
    """Makes unopened stores on one backing, a file or a private redis-server: each one sees
    what the others wrote, as another process or replica would."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "store.db")
        return
    async with redis_server(tmp_path / "redis") as server:
        yield lambda: RedisStore(server.url)


@pytest.fixture
async def store(new_store: Callable[[], Store]) -> AsyncIterator[Store]:
    store = new_store()
    await store.open()
    yield store
    await store.close()


# Round trips.


async def test_store_follows_the_protocol(tmp_path: Path) -> None:
    assert isinstance(SqliteStore(tmp_path / "s.db"), Store)
    assert isinstance(RedisStore("redis://127.0.0.1:1/0"), Store)


async def test_session_round_trip_and_update(store: Store) -> None:
    record = session(repo_url="https://github.com/a/b")
    await store.save_session(record)
    assert await store.get_session(record.key) == record
    assert await store.get_session("T1:C1:9.9") is None

    await store.update_session(record.key, sandbox_id=None, state="idle", last_activity=150.0)
    await store.update_session(record.key, repo_url=None)
    expected = dataclasses.replace(
        record, sandbox_id=None, state="idle", last_activity=150.0, repo_url=None
    )
    assert await store.get_session(record.key) == expected


async def test_the_report_canvas_is_kept_with_the_session_and_outlives_a_save(store: Store) -> None:
    record = session()
    await store.save_session(record)
    canvas = '{"id": "F0CANVAS1", "sha": "ab12"}'
    await store.update_session(record.key, canvas=canvas)
    assert (await store.get_session(record.key)).canvas == canvas
    await store.save_session(dataclasses.replace(record, last_activity=400.0))
    assert (await store.get_session(record.key)).canvas == canvas  # the store's own field


async def test_the_ids_of_the_charts_shared_are_kept_with_the_session(store: Store) -> None:
    record = session()
    await store.save_session(record)
    assert (await store.get_session(record.key)).chart_files == ""
    charts = '{"F0CHART1": "growth.png"}'
    await store.update_session(record.key, chart_files=charts)
    await store.save_session(dataclasses.replace(record, last_activity=400.0))
    assert (await store.get_session(record.key)).chart_files == charts


async def test_a_runs_figures_are_kept_with_it(store: Store) -> None:
    await store.save_session(session())
    await store.start_run(session().key, "r1", "how many?", 10.0, "U1")
    assert (await store.get_run("r1")).figures == ()
    figures = [{"text": "1,402,617,695", "step": 2, "line": "1402617695", "call_id": "t2"},
               {"text": "3.2 million", "step": None, "line": "", "call_id": None}]  # fmt: skip
    await store.record_figures("r1", figures)
    await store.end_run("r1", "finished", 20.0)
    assert (await store.get_run("r1")).figures == tuple(figures)
    with pytest.raises(NotFound):
        await store.record_figures("nope", figures)


async def test_a_sessions_runs_that_reached_the_model_are_listed_oldest_first(
    store: Store,
) -> None:
    await store.save_session(session())
    key = session().key
    for run_id, at in (("r2", 20.0), ("r1", 10.0), ("r0", 5.0)):
        await store.start_run(key, run_id, f"q {run_id}", at, "U1")
    for run_id in ("r2", "r1", "r2"):
        await store.add_turn(key, run_id, {"input_tokens": 1}, 0.01, 30.0)
    await store.record_figures("r1", [{"text": "12", "step": 1, "line": "12", "call_id": "t"}])
    runs = await store.runs(key)
    assert [r.run_id for r in runs] == ["r1", "r2"]  # r0 never reached the model
    assert runs[0].figures == ({"text": "12", "step": 1, "line": "12", "call_id": "t"},)
    assert await store.runs("T9:C9:1.0") == []


async def test_save_session_again_replaces_fields_and_keeps_the_rest(store: Store) -> None:
    await store.save_session(session())
    await store.save_history(session().key, [{"role": "user", "content": "hi"}])
    await store.add_file(session().key, file_record(1))

    await store.save_session(session(state="closed", sandbox_id=None, last=300.0))
    assert await store.get_session(session().key) == session(
        state="closed", sandbox_id=None, last=300.0
    )
    assert await store.load_history(session().key) == [{"role": "user", "content": "hi"}]
    assert await store.files(session().key) == [file_record(1)]


async def test_list_sessions_newest_activity_first(store: Store) -> None:
    for n, last in enumerate([30.0, 10.0, 50.0, 20.0]):
        await store.save_session(session(f"T:C:{n}", last=last))
    await store.update_session("T:C:1", last_activity=60.0)

    listed = await store.list_sessions()
    assert [r.key for r in listed] == ["T:C:1", "T:C:2", "T:C:0", "T:C:3"]
    assert [r.last_activity for r in listed] == [60.0, 50.0, 30.0, 20.0]


async def test_history_round_trip_keeps_unicode_and_nested_blocks(store: Store) -> None:
    key = session().key
    await store.save_session(session())
    assert await store.load_history(key) == []

    messages = [
        {"role": "user", "content": "Ventes par région ? 売上 📈 مرحبا e\u0301 \x00 tab\t"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Je regarde…"},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "run_code",
                    "input": {"language": "python", "code": "print('é')\n", "opts": [1, 2.5, None]},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": [{"type": "text", "text": "é\n\udcff (undecodable byte)"}],
                },
            ],
        },
    ]
    await store.save_history(key, messages)
    assert await store.load_history(key) == messages

    await store.save_history(key, messages[:1])  # replaces, not appends
    assert await store.load_history(key) == messages[:1]


async def test_what_a_save_replaces_is_archived_with_it(store: Store) -> None:
    key = session().key
    await store.save_session(session())
    first = [{"role": "user", "content": [{"type": "text", "text": "q1 ✓"}]}]
    await store.save_history(key, first)
    summary = [{"role": "user", "content": [{"type": "text", "text": "summary"}]}]
    await store.save_history(key, summary, archive={"at": 1.0, "reason": "r1", "messages": first})
    await store.save_history(key, summary + summary)  # no archive: nothing added
    await store.save_history(key, summary, archive={"at": 2.0, "reason": "r2", "messages": []})
    assert await store.load_history(key) == summary
    archived = await store.archived_history(key)
    assert archived == [
        {"at": 1.0, "reason": "r1", "messages": first},
        {"at": 2.0, "reason": "r2", "messages": []},
    ]
    assert await store.archived_history("T:C:none") == []
    with pytest.raises(NotFound):  # no session: neither the history nor its archive
        await store.save_history("T:C:none", summary, archive={"messages": first})
    assert await store.archived_history("T:C:none") == []


async def test_files_in_the_order_taken_in(store: Store) -> None:
    await store.save_session(session("T:C:1"))
    await store.save_session(session("T:C:2"))
    for n in [3, 1, 2]:
        await store.add_file("T:C:1", file_record(n))
    await store.add_file("T:C:2", file_record(9))

    assert await store.files("T:C:1") == [file_record(3), file_record(1), file_record(2)]
    assert await store.files("T:C:2") == [file_record(9)]
    assert await store.files("T:C:3") == []


async def test_runs_in_flight_are_the_unended_ones(store: Store) -> None:
    await store.save_session(session("T:C:1"))
    await store.save_session(session("T:C:2"))
    await store.start_run("T:C:1", "r1", "sales by region?", at=10.0)
    await store.start_run("T:C:2", "r2", "a chart, please", at=30.0)
    await store.start_run("T:C:1", "r3", "and by month?", at=20.0)
    await store.end_run("r1", "finished", at=15.0)

    in_flight = await store.runs_in_flight()
    assert [(r.run_id, r.key, r.question, r.started_at) for r in in_flight] == [
        ("r3", "T:C:1", "and by month?", 20.0),
        ("r2", "T:C:2", "a chart, please", 30.0),
    ]
    assert all(r.ended_at is None and r.outcome is None for r in in_flight)

    await store.end_run("r3", "stopped", at=25.0)
    await store.end_run("r3", "failed", at=26.0)  # the first outcome stands
    await store.end_run("r2", "interrupted", at=40.0)
    assert await store.runs_in_flight() == []


async def test_stop_requests_name_the_first_stopper_and_only_runs_in_flight(
    store: Store,
) -> None:
    await store.save_session(session())
    await store.start_run("T1:C1:1.0", "r1", "q", 10.0, "U1")
    assert (await store.get_run("r1")).stopped_by is None  # type: ignore[union-attr]
    stopped = await store.request_stop("r1", "U2")
    assert stopped is not None and stopped.key == "T1:C1:1.0" and stopped.user == "U1"
    await store.request_stop("r1", "U3")
    assert (await store.get_run("r1")).stopped_by == "U2"  # type: ignore[union-attr]
    await store.end_run("r1", "stopped", 11.0)
    assert await store.request_stop("r1", "U3") is None
    assert await store.request_stop("nope", "U3") is None
    assert await store.get_run("nope") is None


async def test_questions_queue_in_order_and_are_taken_once(store: Store) -> None:
    await store.save_session(session())
    await store.save_session(session("T1:C1:2.0"))
    first = await store.enqueue("T1:C1:1.0", "one", "U1", 1.0)
    await store.enqueue("T1:C1:2.0", "elsewhere", "U9", 1.5)
    second = await store.enqueue("T1:C1:1.0", "two", "U2", 2.0)
    assert second > first
    third = await store.enqueue("T1:C1:1.0", "two more", "U2", 2.5)
    fourth = await store.enqueue("T1:C1:1.0", "one more", "U1", 2.6)
    # One run's worth at a time: the oldest question and its asker's right after it.
    taken = await store.take_queued("T1:C1:1.0")
    assert [(q.id, q.question, q.user) for q in taken] == [(first, "one", "U1")]
    taken = await store.take_queued("T1:C1:1.0")
    assert [(q.id, q.user) for q in taken] == [(second, "U2"), (third, "U2")]
    assert [q.id for q in await store.take_queued("T1:C1:1.0")] == [fourth]
    assert await store.take_queued("T1:C1:1.0") == []
    # Ids are never reused, even once the queue is empty: callers wait on them.
    assert await store.enqueue("T1:C1:1.0", "three", "U3", 3.0) > fourth
    assert [q.question for q in await store.take_queued("T1:C1:2.0")] == ["elsewhere"]
    with pytest.raises(NotFound):
        await store.enqueue("T9:C9:9.0", "x", "U1", 1.0)


async def test_continue_allowances_add_up_and_survive_saves(store: Store) -> None:
    await store.save_session(session())
    await store.grant("T1:C1:1.0", 2.0)
    await store.grant("T1:C1:1.0", 0.5)
    await store.save_session(session(last=500.0))
    assert (await store.get_session("T1:C1:1.0")).granted_usd == 2.5  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        await store.grant("T9:C9:9.0", 1.0)


async def test_a_continue_button_grants_once_even_when_clicks_race(store: Store) -> None:
    await store.save_session(session())
    clicks = [store.grant_once("T1:C1:1.0", "run-a", 2.0) for _ in range(5)]
    assert sorted(await asyncio.gather(*clicks)) == [False] * 4 + [True]
    assert await store.grant_once("T1:C1:1.0", "run-b", 0.5)  # another button: its own grant
    assert not await store.grant_once("T1:C1:1.0", "run-a", 2.0)
    assert (await store.get_session("T1:C1:1.0")).granted_usd == 2.5  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        await store.grant_once("T9:C9:9.0", "run-c", 1.0)


async def test_turn_costs_are_summed_into_the_session(store: Store) -> None:
    await store.save_session(session("T:C:1", last=2.0))
    await store.save_session(session("T:C:2", last=1.0))
    await store.start_run("T:C:1", "r1", "q", at=1.0)
    await store.start_run("T:C:1", "r2", "q", at=2.0)
    usage = {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 1000}
    await store.add_turn("T:C:1", "r1", usage, 0.25, at=1.1)
    await store.add_turn("T:C:1", "r1", usage, None, at=1.2)  # price unknown
    await store.add_turn("T:C:1", "r2", usage, 0.5, at=2.1)

    first = await store.get_session("T:C:1")
    assert first is not None
    assert first.cost_usd == pytest.approx(0.75)
    assert [r.cost_usd for r in await store.list_sessions()] == [pytest.approx(0.75), 0.0]

    # save_session ignores cost_usd: it comes from the turns only.
    await store.save_session(dataclasses.replace(first, cost_usd=99.0))
    assert await store.get_session("T:C:1") == dataclasses.replace(first, cost_usd=0.75)


async def test_the_latest_turns_prompt_size_and_window_are_kept_with_the_session(
    store: Store,
) -> None:
    await store.save_session(session("T:C:1"))
    fresh = await store.get_session("T:C:1")
    assert fresh is not None and (fresh.prompt_tokens, fresh.window_tokens) == (0, 0)
    await store.start_run("T:C:1", "r1", "q", at=1.0)
    first = {"input_tokens": 900, "output_tokens": 50, "cache_write_5m_tokens": 100}
    later = {
        "input_tokens": 30,
        "output_tokens": 80,
        "cache_write_5m_tokens": 200,
        "cache_write_1h_tokens": 5,
        "cache_read_tokens": 1000,
    }
    await store.add_turn("T:C:1", "r1", first, 0.1, at=1.1, window_tokens=200_000)
    await store.add_turn("T:C:1", "r1", later, 0.1, at=1.2, window_tokens=200_000)

    record = await store.get_session("T:C:1")
    assert record is not None
    assert (record.prompt_tokens, record.window_tokens) == (1235, 200_000)  # output not counted
    assert [r.prompt_tokens for r in await store.list_sessions()] == [1235]
    # save_session ignores them, as it does the cost; a turn without a window clears it.
    await store.save_session(dataclasses.replace(record, prompt_tokens=7, window_tokens=7))
    assert await store.get_session("T:C:1") == record
    await store.add_turn("T:C:1", "r1", first, None, at=1.3)
    again = await store.get_session("T:C:1")
    assert again is not None and (again.prompt_tokens, again.window_tokens) == (1000, 0)


async def test_tool_calls_round_trip_in_order(store: Store) -> None:
    await store.save_session(session("T:C:1"))
    await store.save_session(session("T:C:2"))
    await store.start_run("T:C:1", "r1", "q", at=1.0)
    await store.start_run("T:C:2", "r2", "q", at=1.0)
    calls = [tool_call("r1", n) for n in [2, 1, 3]]
    for call in calls:
        await store.add_tool_call("T:C:1", call)
    await store.add_tool_call("T:C:2", tool_call("r2", 7))

    assert await store.tool_calls("T:C:1") == calls
    assert await store.tool_calls("T:C:2") == [tool_call("r2", 7)]
    assert await store.tool_calls("T:C:3") == []


async def test_lone_surrogates_in_free_text_are_stored_replaced(store: Store) -> None:
    await store.save_session(session())
    await store.start_run(session().key, "r1", "q\udcff", at=1.0)
    call = dataclasses.replace(tool_call("r1", 1), excerpt="\udc80")
    await store.add_tool_call(session().key, call)
    assert (await store.runs_in_flight())[0].question == "q?"
    assert (await store.tool_calls(session().key))[0].excerpt == "?"


async def test_writes_about_unknown_sessions_or_runs_raise(store: Store) -> None:
    await store.save_session(session("T:C:1"))
    await store.start_run("T:C:1", "r1", "q", at=1.0)
    with pytest.raises(NotFound):
        await store.update_session("T:C:9", state="idle")
    with pytest.raises(NotFound):
        await store.save_history("T:C:9", [])
    with pytest.raises(NotFound):
        await store.add_file("T:C:9", file_record(1))
    with pytest.raises(NotFound):
        await store.start_run("T:C:9", "r9", "q", at=1.0)
    with pytest.raises(NotFound):
        await store.end_run("r9", "finished", at=1.0)
    with pytest.raises(NotFound):
        await store.add_turn("T:C:1", "r9", {}, 0.1, at=1.0)
    with pytest.raises(NotFound):
        await store.add_tool_call("T:C:9", tool_call("r1", 1))
    with pytest.raises(NotFound):
        await store.add_tool_call("T:C:1", tool_call("r9", 1))
    with pytest.raises(NotFound):
        await store.add_turn("T:C:9", "r1", {}, 0.1, at=1.0)
    with pytest.raises(NotFound):
        await store.update_session("T:C:9")
    with pytest.raises(NotFound):
        await store.grant("T:C:9", 1.0)
    with pytest.raises(StoreError):
        await store.start_run("T:C:1", "r1", "the same run id again", at=2.0)
    # Nothing of the refused writes landed.
    assert await store.list_sessions() == [session("T:C:1")]
    assert [r.run_id for r in await store.runs_in_flight()] == ["r1"]
    assert (await store.get_run("r1")).question == "q"  # type: ignore[union-attr]
    assert await store.tool_calls("T:C:1") == []
    assert await store.spent() == 0.0


# Fencing: a thread's writes carry its owner's token; an older one is refused.


async def fenced_writes(store: Store, key: str, token: int | None, n: int) -> None:
    """Every write a thread's owner makes, each carrying `token`; `n` tells them apart."""
    run_id = f"run-{n}"
    await store.update_session(key, last_activity=float(n), token=token)
    await store.save_history(key, [{"role": "user", "content": f"q{n}"}], token=token)
    await store.add_file(key, file_record(n), token=token)
    await store.start_run(key, run_id, f"q{n}", float(n), token=token)
    await store.add_turn(key, run_id, {"input_tokens": n}, 0.5, float(n), token=token)
    await store.add_tool_call(key, tool_call(run_id, n), token=token)
    await store.take_queued(key, token=token)
    await store.end_run(run_id, "finished", float(n), token=token)


async def test_a_stale_fencing_token_is_refused_and_the_current_one_accepted(
    new_store: Callable[[], Store],
) -> None:
    old, new = new_store(), new_store()  # two replicas
    await old.open()
    await new.open()
    try:
        key = session().key
        await old.save_session(session())
        stale = await old.fence(key)
        await fenced_writes(old, key, stale, 1)
        current = await new.fence(key)  # the thread changed hands
        assert current > stale
        await old.start_run(key, "run-late", "q", 2.0, token=current)  # for the writes below
        await old.enqueue(key, "waiting", "U1", 2.0)
        refused = [
            old.update_session(key, last_activity=9.0, token=stale),
            old.save_history(key, [], token=stale),
            old.save_history(key, [], token=stale, archive={"reason": "stale", "messages": []}),
            old.add_file(key, file_record(9), token=stale),
            old.start_run(key, "run-9", "q", 9.0, token=stale),
            old.add_turn(key, "run-late", {"input_tokens": 9}, 9.0, 9.0, token=stale),
            old.add_tool_call(key, tool_call("run-late", 9), token=stale),
            old.take_queued(key, token=stale),
            old.end_run("run-late", "failed", 9.0, token=stale),
        ]
        for write in refused:
            with pytest.raises(Fenced):
                await write
        # Nothing of the stale writes landed; the current owner's do.
        assert (await new.get_session(key)).last_activity == 1.0  # type: ignore[union-attr]
        assert await new.load_history(key) == [{"role": "user", "content": "q1"}]
        assert await new.archived_history(key) == []
        assert await new.files(key) == [file_record(1)]
        assert await new.get_run("run-9") is None
        assert await new.tool_calls(key) == [tool_call("run-1", 1)]
        assert await new.spent(key=key) == 0.5
        assert (await new.get_run("run-late")).outcome is None  # type: ignore[union-attr]
        await fenced_writes(new, key, current, 2)
        assert [q.question for q in await new.take_queued(key, token=current)] == []
        assert (await new.get_run("run-2")).outcome == "finished"  # type: ignore[union-attr]
        assert await new.load_history(key) == [{"role": "user", "content": "q2"}]
    finally:
        await old.close()
        await new.close()


async def test_tokens_count_up_per_thread_and_no_token_is_not_checked(store: Store) -> None:
    await store.save_session(session("T:C:1"))
    await store.save_session(session("T:C:2"))
    tokens = [await store.fence("T:C:1") for _ in range(3)]
    assert tokens == sorted(set(tokens))
    other = await store.fence("T:C:2")  # another thread's token says nothing about this one
    await fenced_writes(store, "T:C:2", other, 1)
    with pytest.raises(Fenced):
        await store.save_history("T:C:1", [], token=tokens[0])
    with pytest.raises(Fenced):
        await store.save_history("T:C:1", [], token=other + 1000)  # newer than any: not its
    await fenced_writes(store, "T:C:1", None, 2)  # one process alone: unfenced writes
    await fenced_writes(store, "T:C:1", tokens[-1], 3)
    await store.save_session(session("T:C:3"))
    with pytest.raises(Fenced):  # a thread never fenced refuses any token
        await store.save_history("T:C:3", [], token=1)


async def test_bad_values_are_refused(store: Store) -> None:
    await store.save_session(session())
    await store.start_run(session().key, "r1", "q", at=1.0)
    with pytest.raises(ValueError):
        await store.save_session(session(state="gone"))
    with pytest.raises(ValueError):
        await store.update_session(session().key, state="gone")
    with pytest.raises(TypeError):
        await store.update_session(session().key, team="T2")
    with pytest.raises(ValueError):
        await store.end_run("r1", "done", at=2.0)  # type: ignore[arg-type]
    assert await store.get_session(session().key) == session()


async def test_files_keep_their_data_cards(store: Store) -> None:
    await store.save_session(session())
    cards = [{"kind": "table", "columns": [{"name": "région", "type": "float", "nulls": 0.5}]}]
    carded = dataclasses.replace(file_record(1), cards=cards)
    await store.add_file(session().key, carded)
    assert await store.files(session().key) == [carded]


async def test_runs_round_trip_and_in_flight_ties_go_by_run_id(store: Store) -> None:
    await store.save_session(session())
    for run_id in ["rb", "rc", "ra"]:
        await store.start_run(session().key, run_id, f"question {run_id}", 5.0, "U1")
    await store.end_run("rc", "failed", at=7.5)
    ended = await store.get_run("rc")
    assert ended is not None
    assert (ended.key, ended.question, ended.started_at, ended.user) == (
        session().key, "question rc", 5.0, "U1",
    )  # fmt: skip
    assert (ended.ended_at, ended.outcome, ended.stopped_by) == (7.5, "failed", None)
    assert [r.run_id for r in await store.runs_in_flight()] == ["ra", "rb"]


async def test_spending_by_session_user_and_time(store: Store) -> None:
    for key in ["T:C:1", "T:C:2"]:
        await store.save_session(session(key))
    await store.start_run("T:C:1", "r1", "q", 1.0, "U1")
    await store.start_run("T:C:1", "r2", "q", 2.0, "U2")
    await store.start_run("T:C:2", "r3", "q", 3.0, "U1")
    await store.add_turn("T:C:1", "r1", {"input_tokens": 1}, 0.25, at=10.0)
    await store.add_turn("T:C:1", "r1", {"input_tokens": 1}, None, at=11.0)
    await store.add_turn("T:C:1", "r2", {"input_tokens": 1}, 0.5, at=20.0)
    await store.add_turn("T:C:2", "r3", {"input_tokens": 1}, 1.0, at=30.0)

    assert await store.spent() == 1.75
    assert await store.spent(key="T:C:1") == 0.75
    assert await store.spent(user="U1") == 1.25
    assert await store.spent(key="T:C:1", user="U1") == 0.25
    assert await store.spent(user="U1", since=15.0) == 1.0
    assert await store.spent(since=20.0) == 1.5  # a turn at `since` counts
    assert await store.spent(user="U9") == 0.0
    assert await store.spent(key="T:C:9") == 0.0


async def test_feedback_on_a_sessions_runs_oldest_first(store: Store) -> None:
    for key in ["T:C:1", "T:C:2"]:
        await store.save_session(session(key))
    for key, run_id in [("T:C:1", "r1"), ("T:C:2", "r2"), ("T:C:1", "r3")]:
        await store.start_run(key, run_id, "q", 1.0, "U1")
    await store.add_feedback("r3", "U1", "good", 5.0)
    await store.add_feedback("r1", "U2", "bad", 6.0)
    await store.add_feedback("r2", "U1", "good", 7.0)
    await store.add_feedback("r1", "U1", "good", 8.0)

    assert [(f.run_id, f.user, f.value, f.at) for f in await store.feedback("T:C:1")] == [
        ("r3", "U1", "good", 5.0),
        ("r1", "U2", "bad", 6.0),
        ("r1", "U1", "good", 8.0),
    ]
    assert [f.run_id for f in await store.feedback("T:C:2")] == ["r2"]
    assert await store.feedback("T:C:9") == []
    with pytest.raises(NotFound):
        await store.add_feedback("r9", "U1", "good", 9.0)


async def test_everything_survives_a_restart(new_store: Callable[[], Store]) -> None:
    first = new_store()
    await first.open()
    await first.save_session(session())
    await first.save_history(session().key, [{"role": "user", "content": "hi"}])
    await first.add_file(session().key, file_record(1))
    await first.start_run(session().key, "r1", "q", at=1.0)
    await first.add_turn(session().key, "r1", {"output_tokens": 5}, 0.125, at=1.5)
    await first.add_tool_call(session().key, tool_call("r1", 1))
    await first.close()

    second = new_store()
    await second.open()
    try:
        assert await second.get_session(session().key) == session(cost_usd=0.125)
        assert await second.load_history(session().key) == [{"role": "user", "content": "hi"}]
        assert await second.files(session().key) == [file_record(1)]
        assert [r.run_id for r in await second.runs_in_flight()] == ["r1"]
        assert await second.tool_calls(session().key) == [tool_call("r1", 1)]
    finally:
        await second.close()


async def test_a_closed_store_refuses_calls(new_store: Callable[[], Store]) -> None:
    store = new_store()
    with pytest.raises(StoreError):
        await store.get_session("k")
    await store.open()
    with pytest.raises(StoreError):
        await store.open()
    await store.close()
    await store.close()  # twice is fine
    with pytest.raises(StoreError):
        await store.save_session(session())
    with pytest.raises(StoreError):
        await store.enqueue(session().key, "q", "U1", 1.0)


async def test_ping_answers_while_open(new_store: Callable[[], Store]) -> None:
    store = new_store()
    with pytest.raises(StoreError):
        await store.ping()
    await store.open()
    await store.ping()
    await store.close()
    with pytest.raises(StoreError):
        await store.ping()


async def test_ping_reads_the_sqlite_file(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    await store.open()
    try:
        other = sqlite3.connect(tmp_path / "store.db")
        other.execute("ALTER TABLE sessions RENAME TO sessions_gone")
        other.commit()
        other.close()
        with pytest.raises(StoreError, match="no such table"):
            await store.ping()
    finally:
        await store.close()


def test_connections_are_set_up_for_durability(tmp_path: Path) -> None:
    conn = connect(tmp_path / "store.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    finally:
        conn.close()


# Concurrency: many writers at once, the event loop free meanwhile, and two stores (two
# processes or replicas) sharing one backing.


async def test_fifty_concurrent_writers_all_land(store: Store) -> None:
    async def writer(n: int) -> None:
        key = f"T:C:{n}"
        await store.save_session(session(key, last=float(n)))
        await store.save_history(key, [{"role": "user", "content": f"question {n}"}])
        await store.start_run(key, f"r{n}", f"question {n}", at=float(n))
        await store.add_turn(key, f"r{n}", {"input_tokens": n}, 0.125, at=float(n))
        await store.add_tool_call(key, tool_call(f"r{n}", n))
        await store.update_session(key, state="idle")

    await asyncio.gather(*(writer(n) for n in range(50)))

    listed = await store.list_sessions()
    assert [r.key for r in listed] == [f"T:C:{n}" for n in reversed(range(50))]
    assert all(r.state == "idle" and r.cost_usd == 0.125 for r in listed)
    for n in range(50):
        assert await store.load_history(f"T:C:{n}") == [
            {"role": "user", "content": f"question {n}"}
        ]
        assert await store.tool_calls(f"T:C:{n}") == [tool_call(f"r{n}", n)]
    assert len(await store.runs_in_flight()) == 50


async def test_a_big_write_does_not_block_the_event_loop(store: Store) -> None:
    await store.save_session(session())
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    big = [{"role": "user", "content": f"{n} " + "x" * 1_000_000} for n in range(30)]
    await store.save_history(session().key, big)
    task.cancel()
    assert ticks >= 3
    assert len(await store.load_history(session().key)) == 30


async def test_two_stores_hand_each_queued_question_to_one_taker(
    new_store: Callable[[], Store],
) -> None:
    stores = [new_store(), new_store()]
    for store in stores:
        await store.open()
    key = session().key
    await stores[0].save_session(session())
    enqueued: list[int] = []
    takes: list[list[int]] = []
    producing = True

    async def produce(store: Store, name: str) -> None:
        for n in range(40):
            enqueued.append(await store.enqueue(key, f"{name} {n}", name, float(n)))
            await asyncio.sleep(0)

    async def take(store: Store) -> None:
        while True:
            last = not producing  # nothing is enqueued after this take: it drains the queue
            if not (queued := await store.take_queued(key)) and last:
                return
            takes.append([q.id for q in queued])
            await asyncio.sleep(0.001)

    try:
        takers = [asyncio.create_task(take(store)) for store in stores * 2]
        await asyncio.gather(produce(stores[0], "U1"), produce(stores[1], "U2"))
        producing = False
        await asyncio.gather(*takers)
        taken = [id_ for ids in takes for id_ in ids]
        assert len(set(enqueued)) == 80
        assert sorted(taken) == sorted(enqueued)  # each one taken, and only once
        assert all(ids == sorted(ids) for ids in takes)
        # Ids go on increasing from another store, after the queue was emptied.
        assert await stores[1].enqueue(key, "late", "U3", 99.0) > max(enqueued)
    finally:
        for store in stores:
            await store.close()


# Migrations.


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {name for (name,) in rows}


async def test_a_new_or_empty_file_gets_the_whole_schema(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in [tmp_path / "new" / "dir" / "store.db", empty]:
        store = SqliteStore(path)
        await store.open()
        await store.save_session(session())
        await store.close()
        conn = sqlite3.connect(path)
        assert schema_version(conn) == len(MIGRATIONS)
        assert tables(conn) == {
            "sessions", "history", "files", "runs", "turns", "tool_calls", "queue", "feedback",
            "continues", "fences", "history_archive", "schedules", "firings", "notes",
            "definitions", "pool", "snapshots",
            "sqlite_sequence",  # AUTOINCREMENT keeps the queue's last id here
        }  # fmt: skip
        conn.close()


async def test_a_version_1_store_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = connect(path)
    assert migrate(conn, MIGRATIONS[:1]) == 1
    assert "turns" not in tables(conn)
    with transaction(conn):  # as the version-1 code wrote them
        conn.execute(
            "INSERT INTO sessions VALUES ('T1:C1:1.0', 'T1', 'C1', '1.0', 'sb-1', 'active',"
            " NULL, 50.0, 100.0)"
        )
        conn.execute(
            "INSERT INTO history VALUES ('T1:C1:1.0', ?)", ('[{"role": "user", "content": "hi"}]',)
        )
        conn.execute(
            "INSERT INTO files (key, slack_file_id, name, size, sha256, sandbox_path, source)"
            " VALUES ('T1:C1:1.0', 'F1', 'data-1.csv', 1001, ?, '/buddy/data/data-1.csv', ?)",
            (
                f"{1:064x}",
                '{"id": "F1", "url_private": "https://files/F1", "meta": {"n": [1, null]}}',
            ),
        )
    conn.close()

    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.get_session(session().key) == session()
        assert await store.load_history(session().key) == [{"role": "user", "content": "hi"}]
        assert await store.files(session().key) == [file_record(1)]
        # What version 2 brought works on the old data.
        await store.start_run(session().key, "r1", "q", at=1.0)
        await store.add_turn(session().key, "r1", {"input_tokens": 3}, 0.5, at=1.5)
        await store.add_tool_call(session().key, tool_call("r1", 1))
        upgraded = session(cost_usd=0.5, prompt_tokens=3)  # version 9's columns too
        assert (await store.get_session(session().key)) == upgraded
        assert await store.tool_calls(session().key) == [tool_call("r1", 1)]
        assert [r.run_id for r in await store.runs_in_flight()] == ["r1"]
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    assert schema_version(conn) == len(MIGRATIONS)
    conn.close()


def test_a_failed_migration_leaves_the_previous_version(tmp_path: Path) -> None:
    conn = connect(tmp_path / "store.db")
    broken = (MIGRATIONS[0], "CREATE TABLE extra (a TEXT);\nCREATE TABLE broken (;")
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, broken)
    assert schema_version(conn) == 1
    assert "extra" not in tables(conn)
    assert migrate(conn) == len(MIGRATIONS)
    conn.close()


def test_migration_scripts_split_only_between_statements(tmp_path: Path) -> None:
    conn = connect(tmp_path / "store.db")
    script = """
        CREATE TABLE a (x TEXT DEFAULT 'one; two');  -- a comment; with a semicolon
        CREATE TABLE b (y TEXT);
        CREATE TRIGGER a_to_b AFTER INSERT ON a BEGIN INSERT INTO b VALUES (new.x); END;
    """
    assert migrate(conn, (script,)) == 1
    with transaction(conn):
        conn.execute("INSERT INTO a DEFAULT VALUES")
    assert [tuple(row) for row in conn.execute("SELECT y FROM b")] == [("one; two",)]
    conn.close()


async def test_a_store_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    conn.close()
    store = SqliteStore(path)
    with pytest.raises(StoreError, match="schema version"):
        await store.open()
    with pytest.raises(StoreError):
        await store.list_sessions()


# A process killed in the middle of a write.

# The child commits some state through the store, says "committed", waits for a line on
# stdin, then writes through the store's own connection setup and write functions:
#   in-transaction: one transaction that never ends (updates, deletes, big inserts), with
#     "inside" printed once it has written; it is killed before it can commit.
#   commits: one small transaction after another, printing each one's number once committed.
CHILD = r"""
import asyncio, os, sys, time
from pathlib import Path
from bot.store.base import FileRecord, SessionRecord, ToolCallRecord
from bot.store.sqlite import SqliteStore
from bot.store.sqlite_rows import (
    add_file as _add_file, add_tool_call as _add_tool_call, add_turn as _add_turn,
    save_history as _save_history, save_session as _save_session, start_run as _start_run,
    update_session as _update_session,
)
from bot.store.sqlite_schema import connect, transaction

path, mode = Path(sys.argv[1]), sys.argv[2]
BIG = "x" * 65536

def session(key, at):
    return SessionRecord(key, f"sb-{key}", "active", None, at, at)

def file(n):
    return FileRecord(f"F{n}", f"f{n}.csv", n, "0" * 64, f"/buddy/data/f{n}.csv", {"id": n})

def call(run_id, n):
    return ToolCallRecord(run_id, f"toolu_{n}", "run_code", "python", "1+1", "ok", 0, 0.1, "2", n)

async def seed():
    store = SqliteStore(path)
    await store.open()
    for i in range(5):
        key = f"T:C:{i}"
        await store.save_session(session(key, i))
        await store.save_history(key, [{"role": "user", "content": f"question {i} ✓"}])
        await store.add_file(key, file(i))
        await store.start_run(key, f"r{i}", f"question {i}", i)
        await store.add_turn(key, f"r{i}", {"input_tokens": 10}, 0.25, i)
        await store.add_tool_call(key, call(f"r{i}", i))
        if i % 2:
            await store.end_run(f"r{i}", "finished", i + 0.5)
    await store.close()

def one_iteration(conn, i):
    key = f"N:C:{i}"
    _save_session(conn, session(key, 1000 + i))
    _save_history(conn, key, [{"role": "user", "content": BIG}])
    _start_run(conn, key, f"n{i}", "q", i)
    _add_turn(conn, key, f"n{i}", {"output_tokens": 1}, 1.0, i)
    _add_tool_call(conn, key, call(f"n{i}", i))

asyncio.run(seed())
print("committed", flush=True)
sys.stdin.readline()
conn = connect(path)
deadline = time.monotonic() + 60
if mode == "in-transaction":
    with transaction(conn):
        conn.execute("DELETE FROM sessions WHERE key = 'T:C:4'")  # cascades
        _update_session(conn, "T:C:0", {"state": "closed", "sandbox_id": None})
        _add_file(conn, "T:C:1", file(99))
        i = 0
        while time.monotonic() < deadline:
            one_iteration(conn, i)
            if i == 0:
                print("inside", flush=True)
            i += 1
        os._exit(3)  # not killed in time: leave without committing
else:
    i = 0
    while time.monotonic() < deadline:
        with transaction(conn):
            one_iteration(conn, i)
        print(i, flush=True)
        i += 1
"""


def start_child(path: Path, mode: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), mode],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    expect_line(child, "committed")
    return child


def expect_line(child: subprocess.Popen[str], marker: str) -> None:
    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if line != marker:
        child.kill()
        raise AssertionError(f"child said {line!r}, not {marker!r}: {child.communicate()[1]}")


def go_then_kill(child: subprocess.Popen[str], marker: str | None, delay: float) -> str:
    """Let the child write, SIGKILL it `delay` seconds after `marker`; return what it printed."""
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    if marker:
        expect_line(child, marker)
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=10)
    assert child.returncode == -signal.SIGKILL
    return out


def dump(conn: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table."""
    return {
        table: conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
        for table in sorted(tables(conn))
    }


def check_integrity(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Open the file as a restarted bot would (recovering the WAL), check it, dump it."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        return dump(conn)
    finally:
        conn.close()


def read_dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return dump(conn)
    finally:
        conn.close()


async def reopen_and_write(path: Path) -> list[SessionRecord]:
    """The store opens on the recovered file and takes new writes."""
    store = SqliteStore(path)
    await store.open()
    try:
        await store.save_session(session("T:C:new"))
        await store.save_history("T:C:new", [{"role": "user", "content": "after the crash"}])
        return await store.list_sessions()
    finally:
        await store.close()


@pytest.mark.parametrize("delay", [0.0, 0.002, 0.02, 0.1, 0.4])
def test_a_kill_inside_a_transaction_leaves_the_last_committed_state(
    tmp_path: Path, delay: float
) -> None:
    path = tmp_path / "store.db"
    child = start_child(path, "in-transaction")
    committed = read_dump(path)
    assert len(committed["sessions"]) == 5 and len(committed["tool_calls"]) == 5

    go_then_kill(child, "inside", delay)
    wal = path.with_name(path.name + "-wal")
    if delay >= 0.1:  # uncommitted pages had spilled into the WAL: recovery must skip them
        assert wal.stat().st_size > 1_000_000

    assert check_integrity(path) == committed
    listed = asyncio.run(reopen_and_write(path))
    assert [r.key for r in listed] == ["T:C:new", "T:C:4", "T:C:3", "T:C:2", "T:C:1", "T:C:0"]
    assert [r.cost_usd for r in listed] == [0.0] + [0.25] * 5


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.3])
def test_a_kill_between_commits_keeps_every_acknowledged_one(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "store.db"
    child = start_child(path, "commits")
    committed = read_dump(path)

    printed = go_then_kill(child, None, 0.05 + delay).split()
    acknowledged = int(printed[-1]) + 1 if printed else 0

    after = check_integrity(path)
    for table, rows in committed.items():
        assert after[table][: len(rows)] == rows
    new = [row[0] for row in after["sessions"][len(committed["sessions"]) :]]
    # Every acknowledged commit is there, plus at most the one killed before it could say so.
    assert new[:acknowledged] == [f"N:C:{i}" for i in range(acknowledged)]
    assert len(new) in (acknowledged, acknowledged + 1)
    # Each commit landed whole: its history, run, turn and tool call with it.
    for table in ["history", "runs", "turns", "tool_calls"]:
        assert len(after[table]) == len(committed[table]) + len(new)

    listed = asyncio.run(reopen_and_write(path))
    assert sum(r.cost_usd for r in listed) == pytest.approx(5 * 0.25 + len(new))
