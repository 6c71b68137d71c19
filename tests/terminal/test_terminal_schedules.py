"""`python -m bot schedules list` reads the store: each schedule's state, owner, thread,
words with its next firing, and its last firing's outcome."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.cli import main
from bot.store.base import ScheduleRecord
from bot.store.sqlite import SqliteStore


async def seed(path: Path) -> None:
    store = SqliteStore(path)
    await store.open()
    try:
        for sid, state in (("weekly", "active"), ("hourly", "paused")):
            await store.save_schedule(ScheduleRecord(
                id=sid, key="T1:C1:1.0", owner="U1",
                cron="0 9 * * 1" if sid == "weekly" else "0 * * * *",
                zone="Europe/Warsaw", question="Orders?", state=state,
                created_at=1.0 if sid == "weekly" else 2.0,
                paused_why="3 failed firings in a row" if state == "paused" else "",
            ))  # fmt: skip
        await store.claim_firing("weekly", 100.0, "r", 100.0)
        await store.end_firing("weekly", 100.0, "finished")
    finally:
        await store.close()


def test_the_list_shows_each_schedule(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "store.db"
    asyncio.run(seed(path))
    monkeypatch.setenv("STORE_PATH", str(path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert main(["schedules", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("weekly  active  U1  T1:C1:1.0  At 09:00, only on Monday")
    assert "Europe/Warsaw; next Mon" in lines[0] and lines[0].endswith("last: finished")
    assert lines[1].startswith("hourly  paused (3 failed firings in a row)")
    assert lines[1].endswith("never fired")


def test_run_now_asks_for_a_firing(tmp_path: Path, monkeypatch, capsys) -> None:
    path = tmp_path / "store.db"
    asyncio.run(seed(path))
    monkeypatch.setenv("STORE_PATH", str(path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert main(["schedules", "run-now", "hourly"]) == 0
    assert "fires at the next tick" in capsys.readouterr().out
    assert main(["schedules", "run-now", "nope"]) == 2
    assert "No schedule 'nope'" in capsys.readouterr().err

    async def stored() -> ScheduleRecord | None:
        store = SqliteStore(path)
        await store.open()
        try:
            return await store.get_schedule("hourly")
        finally:
            await store.close()

    found = asyncio.run(stored())
    assert found is not None and found.run_now_at is not None
