"""The Toolbox counts the waits on each background command (each wait doubles the next),
only while the command runs: once it ends, is killed, or is found not to exist (an id the
model made up), its count goes, so a long thread's checks leave nothing behind."""

from __future__ import annotations

from pathlib import Path

from bot.agent.tools import Toolbox
from bot.sandbox.base import SandboxSpec
from bot.sandbox.local import LocalProvider
from tests.support import local_provider_at


async def test_wait_counts_go_once_their_commands_end(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root)
    sandbox = await provider.create(SandboxSpec(session_key="waits"))

    async def get() -> LocalProvider:
        return sandbox  # type: ignore[return-value]

    toolbox = Toolbox(get, default_timeout_s=5, max_timeout_s=30, output_chars=4000)

    async def start(code: str) -> str:
        started = await toolbox.call(
            "run_code", {"language": "bash", "code": code, "detached": True}
        )
        return started.content.split("as ")[1].split(";")[0]

    async def check(command_id: str, **more: object) -> str:
        outcome = await toolbox.call("check_command", {"command_id": command_id, **more})
        return outcome.status

    try:
        ends = await start("sleep 0.5; echo done")
        killed = await start("sleep 1000")
        assert await check(ends, wait_s=0) == "running"
        assert await check(killed, wait_s=0) == "running"
        assert toolbox.commands_watched == 2  # both still run: their waits count
        assert await check(ends, wait_s=20) == "ok"
        await check(killed, kill=True)
        for made_up in (f"cmd-{n:08x}" for n in range(50)):
            await check(made_up, wait_s=0)  # refused: no such command
        watched = toolbox.commands_watched
    finally:
        await sandbox.destroy()
        await provider.close()
    assert watched == 0
