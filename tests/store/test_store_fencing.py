"""The writes a thread's owner makes beside its run's own (the report canvas's id, the
figures an answer was traced to, questions queued, Continue allowances) are fenced like the
rest: once another replica has taken the thread over, a stale token changes nothing. On both
backends (a SQLite file, a private redis-server)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.threads import ThreadRef
from bot.slack.view.canvas import ReportCanvases
from bot.slack.web import SlackWeb
from bot.store import Fenced, SqliteStore, Store
from tests.fakes.slack.api import FakeSlack
from tests.store.test_store import new_store, session

__all__ = ["new_store"]  # the fixture, on both backends

FIGURES = [{"text": "42", "step": 1, "line": 3, "call_id": "toolu_1", "earlier": 0}]


async def test_writes_beside_the_run_refuse_a_lapsed_lease(
    new_store: Callable[[], Store],
) -> None:
    old, new = new_store(), new_store()  # two replicas
    await old.open()
    await new.open()
    try:
        key = session().key
        await old.save_session(session())
        stale = await old.fence(key)
        await old.start_run(key, "run-1", "q", 1.0, "U1", token=stale)
        current = await new.fence(key)  # the lease lapsed and another replica took over
        before = await new.get_session(key)
        refused = [
            old.update_session(key, canvas='{"id": "F0STALE"}', token=stale),
            old.record_figures("run-1", FIGURES, token=stale),
            old.enqueue(key, "late question", "U1", 2.0, token=stale),
            old.grant(key, 2.0, token=stale),
            old.grant_once(key, "run:run-1", 2.0, token=stale),
        ]
        for write in refused:
            with pytest.raises(Fenced):
                await write
        assert await new.get_session(key) == before  # no canvas id, no allowance
        assert (await new.get_run("run-1")).figures == ()  # type: ignore[union-attr]
        assert await new.take_queued(key, token=current) == []
        # The button the refused grant_once would have used is still unused, and the
        # current owner's writes land.
        assert await new.grant_once(key, "run:run-1", 2.0, token=current)
        await new.grant(key, 1.0, token=current)
        await new.record_figures("run-1", FIGURES, token=current)
        await new.update_session(key, canvas='{"id": "F0NEW"}', token=current)
        queued_id = await new.enqueue(key, "question", "U2", 3.0, token=current)
        after = await new.get_session(key)
        assert after is not None and after.granted_usd == 3.0 and after.canvas == '{"id": "F0NEW"}'
        assert (await new.get_run("run-1")).figures == tuple(FIGURES)  # type: ignore[union-attr]
        assert [q.id for q in await new.take_queued(key, token=current)] == [queued_id]
    finally:
        await old.close()
        await new.close()


async def test_these_writes_without_a_token_are_not_checked(new_store: Callable[[], Store]) -> None:
    """One process alone fences nothing: its writes carry no token."""
    store = new_store()
    await store.open()
    try:
        key = session().key
        await store.save_session(session())
        await store.fence(key)
        await store.start_run(key, "run-1", "q", 1.0, "U1")
        await store.record_figures("run-1", FIGURES)
        await store.grant(key, 1.0)
        assert await store.grant_once(key, "g", 1.0)
        assert await store.enqueue(key, "q", "U1", 1.0) > 0
        assert (await store.get_session(key)).granted_usd == 2.0  # type: ignore[union-attr]
    finally:
        await store.close()


@pytest.mark.usefixtures("no_proxy")
async def test_a_canvas_id_from_a_replica_the_thread_was_taken_from_is_not_kept(
    tmp_path: Path,
) -> None:
    ref = ThreadRef("T0FAKE001", "C0CHAN001", "1.0")  # a channel of the fake's
    store = SqliteStore(tmp_path / "canvas.db")
    await store.open()
    try:
        async with FakeSlack() as slack:
            web = SlackWeb(AsyncWebClient(token=slack.bot_token, base_url=slack.api_url))
            await store.save_session(session(ref.key))
            stale = await store.fence(ref.key)
            current = await store.fence(ref.key)  # the thread changed hands
            canvases = ReportCanvases(web, store, lambda key: stale)
            assert await canvases.publish(ref, "# Report\n\nOne figure: 42.\n")
            kept = (await store.get_session(ref.key)).canvas  # type: ignore[union-attr]
            owner = ReportCanvases(web, store, lambda key: current)
            canvas_id = await owner.publish(ref, "# Report\n\nOne figure: 43.\n")
            now = (await store.get_session(ref.key)).canvas  # type: ignore[union-attr]
    finally:
        await store.close()
    assert kept == ""  # the stale replica's canvas stands in Slack, but its id is not kept
    assert json.loads(now)["id"] == canvas_id
