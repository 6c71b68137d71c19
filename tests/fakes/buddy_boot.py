"""A fake sandbox's first boot: its local backing sandbox, the fetch into /buddy/data, the
first boot commands; `setup_status` turns SUCCESS (or FAILED) a moment before `status`
turns RUNNING."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import SandboxError
from bot.sandbox.base import DATA_DIR, SandboxSpec
from bot.sandbox.local import LocalSandbox
from tests.fakes.buddy_state import SETUP_TIMEOUT_S, FakeSandbox, exit_code, lines_of

if TYPE_CHECKING:
    from tests.fakes.buddy_api import FakeBuddy


class Boot:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server

    async def boot(self, sb: FakeSandbox) -> None:
        await asyncio.sleep(self.server.boot_delay_s)
        try:
            ok = await self._set_up(sb)
        except SandboxError as err:  # no local sandbox could be started at all
            sb.boot_logs.append(f"Sandbox failed to start: {err}")
            sb.setup_status = "FAILED"
            sb.set_status("FAILED", "the sandbox could not start")
            sb.ready.set()
            return
        sb.setup_status = "SUCCESS" if ok else "FAILED"
        await asyncio.sleep(self.server.running_lag_s)
        sb.set_status("RUNNING", "booted")  # the machine is up even when its setup failed
        sb.touch()
        sb.ready.set()

    async def _set_up(self, sb: FakeSandbox) -> bool:
        """Start the backing sandbox, fetch, run first boot commands; False if setup failed."""
        provider = self.server.provider
        spec = SandboxSpec(session_key=sb.id, tags=tuple(sb.tags))
        repository = sb.fetch[0]["repository"] if sb.fetch else None
        if repository is not None:
            sb.boot_logs.append(f"Fetching {repository} into {DATA_DIR}")
            folder = self.server.repos.get(repository)
            try:
                if folder is None:
                    raise SandboxError(f"repository {repository} not found")
                repo_url = Path(folder).resolve().as_uri()
                sb.local = await provider.create(
                    SandboxSpec(sb.id, repo_url=repo_url, tags=spec.tags)
                )
            except SandboxError as err:
                sb.boot_logs.append(f"Fetch failed: {err}")
                sb.local = await provider.create(spec)
                return False
        else:
            sb.local = await provider.create(spec)
        if sb.snapshot_id is not None:
            sb.boot_logs.append(f"Restoring snapshot {sb.snapshot_id}")
            snapshot = self.server.snapshots.get(sb.snapshot_id)
            if snapshot is None:
                raise SandboxError(f"snapshot {sb.snapshot_id} was deleted")
            await self.server.snapshot_api.restore(snapshot, sb.local)
        if sb.first_boot_commands:
            return await self._first_boot(sb, sb.local)
        return True

    async def _first_boot(self, sb: FakeSandbox, local: LocalSandbox) -> bool:
        if sb.gone:
            return False
        sb.boot_logs.append("Running first boot commands")
        script = "set -e\n" + (sb.first_boot_commands or "")
        sb.last_spawn = time.monotonic()
        result = await local.run_code("bash", script, SETUP_TIMEOUT_S)
        sb.boot_logs += lines_of(result.stdout) + lines_of(result.stderr)
        if result.exit_code == 0:
            sb.boot_logs.append("First boot commands finished")
            return True
        sb.boot_logs.append(f"First boot commands failed with exit code {exit_code(result)}")
        return False
