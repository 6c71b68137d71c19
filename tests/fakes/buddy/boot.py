"""A fake sandbox's first boot: its VM's disk, the fetch into /buddy/data (a clone made on
the host, as Buddy's own fetch is no command of the user's), the snapshot's disk, the
first boot commands; `setup_status` turns SUCCESS (or FAILED) a moment before `status`
turns RUNNING.

A sandbox made from a snapshot is STARTING, then RESTORING while the snapshot's disk is
put in place (and its first boot commands run), then RUNNING. The document lists
RESTORING (§4.1) and the path `STARTING/RESTORING -> RUNNING` (§6.1, [INF]) without
saying when; a restore from a snapshot is the plainest reading.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from tests.fakes.buddy.state import DATA_DIR, SETUP_TIMEOUT_S, FakeSandbox, lines_of
from tests.fakes.buddy.vm import Vm, VmError

if TYPE_CHECKING:
    from tests.fakes.buddy.api import FakeBuddy


class Boot:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server

    async def boot(self, sb: FakeSandbox) -> None:
        await asyncio.sleep(self.server.boot_delay_s)
        try:
            ok = await self._set_up(sb)
        except VmError as err:  # no VM could be started at all
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
        """Make the VM, fetch, restore, run first boot commands; False if setup failed."""
        sb.vm = vm = self.server.new_vm(sb)
        if sb.fetch and not await self._fetch(sb, vm, sb.fetch[0]["repository"]):
            return False
        if sb.snapshot_id is not None:
            sb.boot_logs.append(f"Restoring snapshot {sb.snapshot_id}")
            sb.set_status("RESTORING", "from a snapshot")
            snapshot = self.server.snapshots.get(sb.snapshot_id)
            if snapshot is None:
                raise VmError(f"snapshot {sb.snapshot_id} was deleted")
            await self.server.snapshot_api.restore(snapshot, vm)
            await asyncio.sleep(self.server.restore_delay_s)
        if sb.first_boot_commands:
            return await self._first_boot(sb, vm)
        return True

    async def _fetch(self, sb: FakeSandbox, vm: Vm, repository: str) -> bool:
        sb.boot_logs.append(f"Fetching {repository} into {DATA_DIR}")
        folder = self.server.repos.get(repository)
        if folder is None:
            sb.boot_logs.append(f"Fetch failed: repository {repository} not found")
            return False
        git = await asyncio.create_subprocess_exec(
            *("git", "clone", "--quiet", "--depth", "1", "--"),
            folder.resolve().as_uri(),
            str(vm.data),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await git.communicate()
        if git.returncode != 0:
            sb.boot_logs.append(f"Fetch failed: {err.decode(errors='replace').strip()}")
            return False
        return True

    async def _first_boot(self, sb: FakeSandbox, vm: Vm) -> bool:
        if sb.gone:
            return False
        sb.boot_logs.append("Running first boot commands")
        script = "set -e\n" + (sb.first_boot_commands or "")
        sb.last_spawn = time.monotonic()
        result = await vm.run(script, SETUP_TIMEOUT_S)
        sb.boot_logs += lines_of(result.stdout) + lines_of(result.stderr)
        if result.exit_code == 0:
            sb.boot_logs.append("First boot commands finished")
            return True
        sb.boot_logs.append(f"First boot commands failed with exit code {result.exit_code}")
        return False
