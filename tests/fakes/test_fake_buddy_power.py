"""The fake Buddy stops a sandbox after its inactivity timeout, and starts, stops and
restarts it on request: the disk is kept, the processes are not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.buddy_client import (
    BOOT_S,
    client_for,
    create,
    message,
    process_running,
    running,
    start,
    wait_command,
    wait_ready,
    wait_status,
)
from tests.fakes.buddy import FakeBuddy

IDLE_S = 0.6
SLEEPER = b"sleep\x00271.828\x00"  # a command line no other test runs


@pytest.fixture
async def buddy(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=BOOT_S, inactivity_timeout_s=IDLE_S) as fake:
        yield fake


@pytest.fixture
async def api(buddy: FakeBuddy) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(buddy) as client:
        yield client


async def test_inactivity_stops_the_sandbox_keeping_files_and_ending_processes(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    sid = await running(api)
    started = time.monotonic()
    cid = await start(api, sid, "echo kept > /buddy/work/a.txt; sleep 271.828")
    stopping = await wait_status(api, sid, "STOPPING")
    assert time.monotonic() - started >= IDLE_S * 0.9  # the command's start was activity
    assert stopping["setup_status"] == "SUCCESS"
    await wait_status(api, sid, "STOPPED")
    assert not process_running(SLEEPER)
    done = await wait_command(api, sid, cid)
    assert (done["status"], done["exit_code"]) == ("FAILED", 137)
    for refused in (
        await api.get(f"/sandboxes/{sid}/content/buddy/work"),
        await api.post(f"/sandboxes/{sid}/commands", json={"command": "true"}),
        await api.post(f"/sandboxes/{sid}/exec", json={"command": "true"}),
    ):
        assert (refused.status_code, message(refused)) == (400, "Instance is not running")

    woken = await api.post(f"/sandboxes/{sid}/start", json={})
    assert (woken.status_code, woken.json()["status"]) == (200, "STARTING")
    view = await wait_ready(api, sid)
    assert view["setup_status"] == "SUCCESS"
    kept = await api.get(f"/sandboxes/{sid}/download/buddy/work/a.txt")
    assert kept.content == b"kept\n"
    statuses = [status for _, status, _ in buddy.sandboxes[sid].history]
    assert statuses == [
        *("STARTING", "RUNNING", "STOPPING", "STOPPED"),
        *("STARTING", "RESTORING", "RUNNING"),  # the disk is attached again
    ]


async def test_commands_postpone_the_stop(buddy: FakeBuddy, api: httpx.AsyncClient) -> None:
    sid = await running(api)
    for _ in range(4):  # 1.2 s of activity, twice the timeout
        await start(api, sid, "true")
        await asyncio.sleep(IDLE_S / 2)
    assert buddy.sandboxes[sid].status == "RUNNING"
    await wait_status(api, sid, "STOPPED")


async def test_the_sandboxs_own_timeout_applies_without_an_override(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=BOOT_S) as buddy, client_for(buddy) as api:
        short = (await wait_ready(api, (await create(api, timeout=1)).json()["id"]))["id"]
        long = (await wait_ready(api, (await create(api, timeout=600)).json()["id"]))["id"]
        await wait_status(api, short, "STOPPED", timeout_s=5)
        assert buddy.sandboxes[long].status == "RUNNING"


async def test_start_stop_and_restart_routes(buddy: FakeBuddy, api: httpx.AsyncClient) -> None:
    buddy.inactivity_timeout_s = 600
    sid = await running(api)
    already = await api.post(f"/sandboxes/{sid}/start", json={})
    assert (already.status_code, message(already)) == (400, "Sandbox is already running")
    fields = await api.post(f"/sandboxes/{sid}/stop", json={"force": True})
    assert fields.status_code == 400

    stopped = await api.post(f"/sandboxes/{sid}/stop", json={})
    assert (stopped.status_code, stopped.json()["status"]) == (200, "STOPPING")
    busy = await api.post(f"/sandboxes/{sid}/start")
    assert busy.status_code == 400  # not while it is stopping
    await wait_status(api, sid, "STOPPED")
    again = await api.post(f"/sandboxes/{sid}/stop", json={})
    assert (again.status_code, message(again)) == (400, "Sandbox is already stopped")

    buddy.boot_delay_s = 0.4
    assert (await api.post(f"/sandboxes/{sid}/start")).json()["status"] == "STARTING"
    held = time.monotonic()
    cid = await start(api, sid, "echo after")  # held until the sandbox runs again
    assert time.monotonic() - held >= 0.3
    assert (await wait_command(api, sid, cid))["status"] == "SUCCESSFUL"

    buddy.boot_delay_s = BOOT_S
    sleeper = await start(api, sid, "sleep 271.828")
    restarted = await api.post(f"/sandboxes/{sid}/restart", json={})
    assert (restarted.status_code, restarted.json()["status"]) == (200, "STARTING")
    await wait_ready(api, sid)
    assert (await wait_command(api, sid, sleeper))["exit_code"] == 137
    assert not process_running(SLEEPER)
