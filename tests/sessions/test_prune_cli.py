"""Retention from the terminal (`python -m bot sessions prune`) and in the background (the
bot's Pruner, which only prunes on its turn among replicas)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.compose import build_store
from bot.sessions.pruning import Pruner, Retention
from bot.settings import load_settings
from bot.store import Pruned, SqliteStore, Store
from bot.store.redis_store import RedisStore
from tests.redis_server import redis_server
from tests.store.test_redis_store import BUDDY
from tests.store.test_store import session
from tests.store.test_store_upkeep import CUTOFF, NOW, OLD, populate, run

DAY = 86_400.0


async def fill(store: Store) -> None:
    """One session done 100 days ago (with a run), one active now; real time, as the CLI's."""
    now = time.time()
    await store.open()
    try:
        await store.save_session(session("T1:C1:1.0", last=now - 100 * DAY, sandbox_id=None))
        await run(store, "T1:C1:1.0", "r1", now - 100 * DAY)
        await store.save_session(session("T1:C1:2.0", last=now, sandbox_id="sb-2"))
        await store.save_history("T1:C1:1.0", [{"role": "user", "content": "x" * 2_000_000}])
    finally:
        await store.close()


def test_prune_prints_what_it_would_remove_then_removes_it_and_vacuums(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv("STORE_PATH", str(tmp_path / "s.db"))
    asyncio.run(fill(SqliteStore(tmp_path / "s.db")))

    assert main(["sessions", "prune", "--dry-run", "--vacuum"]) == 0
    out = capsys.readouterr().out
    assert out == (
        "Would remove 1 session, 1 run, 1 tool call, 1 feedback "
        "(sessions done and quiet for 90 days; runs ended 90 days ago).\n"
    )
    assert main(["sessions", "prune", "--vacuum"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Removed 1 session, 1 run, 1 tool call, 1 feedback (")
    assert lines[1].startswith(f"VACUUM: {tmp_path / 's.db'} ") and " MB -> " in lines[1]
    before, after = (float(part.split()[0]) for part in lines[1].split(" ", 2)[2].split("->"))
    assert after < before

    assert main(["sessions"]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == ["T1:C1:2.0"]
    assert main(["sessions", "prune"]) == 0
    assert capsys.readouterr().out.startswith("Removed 0 sessions, 0 runs, 0 tool calls,")

    monkeypatch.setenv("SESSION_RETENTION_DAYS", "0")
    monkeypatch.setenv("AUDIT_RETENTION_DAYS", "0")
    assert main(["sessions", "prune"]) == 0
    assert capsys.readouterr().out.startswith("Retention is off")


def test_prune_on_redis(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def serve_and_prune() -> tuple[int, int]:
        async with redis_server(tmp_path / "redis") as server:
            await fill(RedisStore(server.url))
            for name, value in {**BUDDY, "redis_url": server.url}.items():
                monkeypatch.setenv(name.upper(), value)
            # main() runs its own event loop: in a thread, as a terminal would be its own process
            code = await asyncio.to_thread(main, ["sessions", "prune", "--vacuum"])
            listed = await asyncio.to_thread(main, ["sessions"])
            return code, listed

    monkeypatch.chdir(tmp_path)
    assert asyncio.run(serve_and_prune()) == (0, 0)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Removed 1 session, 1 run, 1 tool call, 1 feedback (")
    assert lines[1].startswith("--vacuum: nothing to do on Redis")
    assert [line.split()[1] for line in lines[2:]] == ["T1:C1:2.0"]


async def test_the_pruner_prunes_in_the_background_on_its_turn_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        keys = await populate(store)
        turns = asyncio.Queue[None]()

        async def not_mine() -> bool:
            turns.put_nowait(None)
            return False

        retention = Retention(90, 90)
        idle = Pruner(store, retention, interval_s=0.01, clock=lambda: NOW, turn=not_mine)
        idle.start()
        for _ in range(3):  # asked three times: another replica's turn each time
            await turns.get()
        await idle.stop()
        assert await store.get_session(keys["done"]) is not None

        pruner = Pruner(store, retention, interval_s=0.01, clock=lambda: NOW)
        pruner.start()
        async with asyncio.timeout(20):
            while await store.get_session(keys["done"]) is not None:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        await pruner.stop()
        assert await store.get_session(keys["recent"]) is not None
        assert await store.prune(CUTOFF, CUTOFF) == Pruned()
        assert retention.cutoffs(NOW) == (CUTOFF, CUTOFF) and OLD < CUTOFF
    finally:
        await store.close()


def test_the_redis_ttl_outlasts_retention_and_a_kept_sandbox() -> None:
    def ttl(**values: object) -> int:
        settings = load_settings(_env_file=None, redis_url="redis://r:6379", **BUDDY, **values)
        store = build_store(settings)
        assert isinstance(store, RedisStore)
        return store.ttl_s

    assert ttl() == 90 * 86_400 + 900 + 86_400
    assert ttl(audit_retention_days=120, session_retain_s=600) == 120 * 86_400 + 900 + 600
    assert ttl(session_retention_days=0) == 0  # sessions kept forever: nothing expires
    assert ttl(audit_retention_days=0) == 0
