"""Sessions on the Buddy backend: what users and the model see when Buddy misbehaves,
and orphan clean-up through the REST API."""

from __future__ import annotations

from pathlib import Path

from bot.run_events import RunFinished, discard
from bot.sandbox.base import SandboxSpec
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.fakes.buddy import FakeBuddy
from tests.support import Recorder, buddy_settings, file_chunks, runtime_for


def run_python(code: str) -> dict:
    return tool_use("run_code", {"language": "python", "code": code})


async def test_sandbox_vanishing_mid_session_is_reported_clearly(sandbox_root: Path) -> None:
    def script(req):
        match req.turn:
            case 0:
                return Reply([run_python("print('first')")])
            case 1:
                state["fake"].vanish(state["id"])  # deleted behind the bot's back
                return Reply([run_python("print('second')")])
            case _:
                return Reply([text(req.tool_results()[-1].text)])

    state: dict = {}
    recorder = Recorder()
    async with (
        FakeAnthropic(script) as model,
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
    ):
        runtime = runtime_for(model.base_url, sandbox_root, **buddy_settings(fake.base_url))
        session = runtime.sessions.new("vanishing")
        state.update(fake=fake, id=(await session.sandbox()).id)
        try:
            result = await session.ask("go", recorder)
        finally:
            await session.close()
            await runtime.close()
    assert isinstance(result, RunFinished)
    assert "no longer exists" in result.answer  # what the model was told, it passed on
    assert recorder.finished[-1].status == "error"
    assert "no longer exists" in recorder.finished[-1].excerpt


async def test_orphans_are_destroyed_and_live_sessions_spared(sandbox_root: Path) -> None:
    async with (
        FakeAnthropic(lambda req: Reply([text("hi")])) as model,
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
    ):
        runtime = runtime_for(
            model.base_url, sandbox_root, orphan_min_age_s=0, **buddy_settings(fake.base_url)
        )
        # A sandbox left by an earlier, crashed process: tagged, owned by no session here.
        orphan = await runtime.provider.create(
            SandboxSpec("crashed", tags=("slack-code-interpreter",))
        )
        stranger = await runtime.provider.create(SandboxSpec("other", tags=("not-ours",)))
        store = SqliteStore(sandbox_root / "sessions.db")
        await store.open()
        engine = runtime.engine(store, lambda key: discard, lambda source: file_chunks)
        live = await (await engine.open("T1:C1:1.0")).sandbox()
        try:
            destroyed = await runtime.orphan_sweeper(engine).sweep()
            assert destroyed == [orphan.id]
            assert set(fake.sandboxes) == {live.id, stranger.id}
        finally:
            await engine.close("T1:C1:1.0")
            await stranger.destroy()
            await runtime.close()
            await store.close()
        assert not fake.sandboxes
