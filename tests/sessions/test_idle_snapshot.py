"""SESSION_IDLE_ACTION=snapshot on the fake Buddy: a quiet thread's sandbox is kept as a
snapshot and deleted; the thread's next question gets a sandbox made from the snapshot,
/buddy/work as it was and no file uploaded again, and the snapshot then goes. Snapshots
past the cap, and those no thread names, are deleted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bot.compose import Runtime
from bot.run_events import RunFinished
from bot.sandbox.base import SandboxSpec, Snapshots
from bot.sessions.engine import Engine
from bot.sessions.events import SandboxSuspended
from bot.sessions.sandbox_changes import RESTORED
from bot.sessions.snapshots import SnapshotKeeper
from bot.settings import Settings
from bot.store.base import SessionRecord
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.fakes.buddy import FakeBuddy
from tests.support import Recorder, buddy_settings, runtime_for, settings_for

KEY = "T1:C1:300.1"
IDLE_S = 0.4
CHECK = (
    "import os; print(os.path.exists('/buddy/work/mark'), "
    "sorted(os.listdir('/buddy/work/uploads'))); open('/buddy/work/mark', 'w')"
)


def checking(req: ModelRequest) -> Reply:
    """Says whether the mark and the upload are there, and leaves the mark."""
    results = req.tool_results()
    if results:
        return Reply([text(results[-1].text.split("--- stdout ---\n")[1].split("\n")[0])])
    return Reply([tool_use("run_code", {"language": "python", "code": CHECK})])


async def data_csv() -> AsyncIterator[bytes]:
    yield b"n\n1\n2\n"


@asynccontextmanager
async def snapshotting(
    root: Path, **overrides: object
) -> AsyncIterator[tuple[Engine, Runtime, Recorder, FakeAnthropic, FakeBuddy, SqliteStore]]:
    told = Recorder()
    async with FakeAnthropic(checking) as model, FakeBuddy(root, boot_delay_s=0.05) as fake:
        settings = {
            **buddy_settings(fake.base_url),
            "session_idle_action": "snapshot",
            "session_idle_timeout": IDLE_S,
            "orphan_min_age_s": 0,
            **overrides,
        }
        runtime = runtime_for(model.base_url, root, **settings)
        store = SqliteStore(root / "snap.db")
        await store.open()
        engine = runtime.engine(store, lambda key: told, lambda source: data_csv)
        try:
            yield engine, runtime, told, model, fake, store
        finally:
            await engine.shutdown(0)
            await engine.close(KEY)
            await store.close()
            await runtime.close()


async def answer(engine: Engine, question: str) -> str:
    result = await (await engine.ask(KEY, question, user="U1"))
    assert isinstance(result, RunFinished)
    return result.answer


def uploads(fake: FakeBuddy) -> int:
    return len(fake.requests_to("POST", r"/content/upload/"))


async def test_a_quiet_thread_resumes_from_its_snapshot(sandbox_root: Path) -> None:
    async with snapshotting(sandbox_root) as (engine, _, told, model, fake, store):
        await engine.add_file(KEY, "data.csv", data_csv, {"id": "F1"})
        assert await answer(engine, "first") == "False ['data.csv']"
        first = engine.sandbox_id(KEY)
        sent = uploads(fake)
        await asyncio.sleep(IDLE_S)
        assert await engine.reap() == [KEY]
        assert told.of(SandboxSuspended) == [SandboxSuspended(snapshot=True)]
        assert first not in fake.sandboxes  # the sandbox is gone, its disk kept
        [snapshot] = fake.snapshots.values()
        assert snapshot.status == "CREATED"
        assert await store.snapshot_of(KEY) == snapshot.id

        assert await answer(engine, "second") == "True ['data.csv']"  # /buddy/work as it was
        assert uploads(fake) == sent  # nothing uploaded again
        assert RESTORED in model.requests[-2].last_user_text
        [restore] = fake.requests_to("POST", r"/sandboxes$")[-1:]
        assert restore.json["snapshot_id"] == snapshot.id
        assert engine.sandbox_id(KEY) not in (None, first)
        assert not fake.snapshots  # used: deleted
        assert await store.snapshot_of(KEY) is None


async def test_a_snapshot_that_cannot_be_restored_falls_back_to_the_files(
    sandbox_root: Path,
) -> None:
    async with snapshotting(sandbox_root) as (engine, _, _, model, fake, store):
        await engine.add_file(KEY, "data.csv", data_csv, {"id": "F1"})
        await answer(engine, "first")
        await asyncio.sleep(IDLE_S)
        assert await engine.reap() == [KEY]
        [snapshot] = fake.snapshots.values()
        del fake.snapshots[snapshot.id]  # gone behind the bot's back
        assert await answer(engine, "second") == "False ['data.csv']"  # a fresh sandbox
        assert "this is a fresh one" in model.requests[-2].last_user_text
        assert await store.snapshot_of(KEY) is None


async def test_snapshots_past_the_cap_or_named_by_no_thread_are_deleted(
    sandbox_root: Path,
) -> None:
    limited = snapshotting(sandbox_root, buddy_snapshots_max=2)
    async with limited as (_, runtime, _, _, fake, store):
        keeper = runtime.snapshot_keeper(store)
        assert isinstance(keeper, SnapshotKeeper)
        tag = runtime.settings.sandbox_tag
        made = [
            await runtime.provider.create(SandboxSpec(f"cap-{i}", tags=(tag,))) for i in range(3)
        ]
        taken = []
        for i, sandbox in enumerate(made):
            key, now = f"T1:C1:{i}.1", time.time()
            await store.save_session(SessionRecord(key, None, "idle", None, now, now))
            taken.append(await keeper.keep(key, sandbox.id))
            await asyncio.sleep(0.01)  # distinct creation times
        assert set(fake.snapshots) == set(taken[1:])  # the oldest went past the cap of 2
        assert await store.snapshots() == {f"T1:C1:{i}.1": taken[i] for i in (1, 2)}
        # a snapshot a crash left unrecorded, and one whose thread was pruned
        assert isinstance(runtime.provider, Snapshots)
        stray = await runtime.provider.take_snapshot(made[0].id, f"{tag}-stray")
        await store.set_snapshot("T1:C1:gone", taken[1])
        await store.set_snapshot("T1:C1:1.1", None)
        later = time.time() + 3600
        assert sorted(await keeper.sweep(later)) == sorted([stray, taken[1]])
        assert set(fake.snapshots) == {taken[2]}
        for sandbox in made:
            await sandbox.destroy()


def test_snapshots_need_buddy(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="SESSION_IDLE_ACTION=snapshot needs Buddy"):
        settings_for("http://127.0.0.1:9", tmp_path, session_idle_action="snapshot")
    assert isinstance(
        settings_for(
            "http://127.0.0.1:9", tmp_path, session_idle_action="snapshot",
            **buddy_settings("http://127.0.0.1:9"),
        ),
        Settings,
    )  # fmt: skip
