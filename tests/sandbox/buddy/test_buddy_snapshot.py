"""BUDDY_SNAPSHOT: new sandboxes start from a snapshot's disk; an id Buddy does not know is
told as a setting to fix."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from bot.errors import SandboxConfigError
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from tests.fakes.buddy import FakeBuddy

TOKEN = "buddy-test-token"


def config_for(fake: FakeBuddy, snapshot_id: str) -> BuddyConfig:
    return BuddyConfig(
        token=TOKEN,
        workspace="acme",
        project="analytics",
        api_url=fake.base_url,
        retry_base_delay_s=0.01,
        poll_interval_s=0.02,
        snapshot_id=snapshot_id,
    )


async def prepared_snapshot(fake: FakeBuddy) -> str:
    """A sandbox prepared by hand (a tool installed under /buddy/work), then snapshotted."""
    async with httpx.AsyncClient(
        base_url=f"{fake.base_url}/workspaces/acme",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as api:
        body = {"name": "prepared", "os": "ubuntu:22.04"}
        sid = (await api.post("/sandboxes?project_name=analytics", json=body)).json()["id"]
        while fake.sandboxes[sid].status != "RUNNING":  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        tool = "mkdir -p /buddy/work/.tools && echo ready > /buddy/work/.tools/marker"
        await api.post(f"/sandboxes/{sid}/exec", json={"command": tool})
        snap_id = (await api.post(f"/sandboxes/{sid}/snapshots", json={})).json()["id"]
        while fake.snapshots[snap_id].status != "CREATED":  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        await api.delete(f"/sandboxes/{sid}")
        return snap_id


async def test_sandboxes_start_from_the_snapshot(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake:
        snap_id = await prepared_snapshot(fake)
        provider = BuddyProvider(config_for(fake, snap_id))
        try:
            sandbox = await provider.create(SandboxSpec("s1", tags=("bot",)))
            result = await sandbox.run_code("bash", "cat /buddy/work/.tools/marker", 10)
            assert result.stdout.text == "ready\n"
            assert fake.sandboxes[sandbox.id].os == "ubuntu:22.04"  # the snapshot's
            statuses = [status for _, status, _ in fake.sandboxes[sandbox.id].history]
            assert statuses == ["STARTING", "RESTORING", "RUNNING"]  # waited through
            # the bot's own folders are made by its first boot, as on a new sandbox
            names = [entry.name for entry in await sandbox.list_dir("/buddy/work")]
            assert {"uploads", "out"} <= set(names)
            await sandbox.destroy()
        finally:
            await provider.close()


async def test_an_unknown_snapshot_names_the_setting(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake:
        provider = BuddyProvider(config_for(fake, "nosuchsnap1234"))
        try:
            with pytest.raises(SandboxConfigError) as caught:
                await provider.create(SandboxSpec("s1"))
        finally:
            await provider.close()
    message = str(caught.value)
    assert "BUDDY_SNAPSHOT" in message and "Snapshot not found" in message
    assert "BUDDY_WORKSPACE" not in message
    assert fake.sandboxes == {}
