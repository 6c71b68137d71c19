"""The fake Buddy's sandboxes as the document describes a Buddy sandbox: a VM of the fake's
own (no code of the bot's sandboxes), commands in bash as `buddy` on the machine's network,
and RESTORING on the way to RUNNING when a disk is put back."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.buddy_client import BOOT_S, client_for, message, running, wait_ready, wait_status
from tests.fakes.buddy import FakeBuddy
from tests.fakes.buddy.vm import WORK_DIR, Vm
from tests.support import CHECKOUT

RESTORE_S = 0.5  # long enough to be seen, polled for rather than slept through


@pytest.fixture
async def buddy(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=BOOT_S, restore_delay_s=RESTORE_S) as fake:
        yield fake


@pytest.fixture
async def api(buddy: FakeBuddy) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(buddy) as client:
        yield client


def unraisable_after(scenario: Coroutine[None, None, None]) -> list[object]:
    """What is reported as unraisable once `scenario` ran on a loop closed right after it,
    as a test's loop is: a process transport left open fails when collected."""
    unraisable: list[object] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(scenario)
        loop.close()
        gc.collect()
    finally:
        sys.unraisablehook = hook
    return unraisable


async def sh(api: httpx.AsyncClient, sid: str, command: str) -> dict[str, Any]:
    response = await api.post(f"/sandboxes/{sid}/exec", json={"command": command})
    assert response.status_code == 200, response.text
    return response.json()


# -- its own isolation


def test_the_fake_loads_none_of_the_bots_sandbox_code() -> None:
    probe = (
        "import sys, tests.fakes.buddy.api\n"
        "print(sorted(m for m in sys.modules if m == 'bot' or m.startswith('bot.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=CHECKOUT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


async def test_commands_run_in_bash_as_buddy_on_the_machines_network(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    sid = await running(api)
    port = buddy.base_url.rsplit(":", 1)[1]
    script = (
        'id -un; [ -n "$BASH_VERSION" ] && echo bash; '
        f"exec 3<>/dev/tcp/127.0.0.1/{port}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; head -1 <&3"
    )
    result = await sh(api, sid, script)
    lines = result["stdout"].splitlines()
    assert lines[:2] == ["buddy", "bash"]
    assert lines[2].startswith("HTTP/1.")  # the fake's own port, reached from inside
    # its processes may make namespaces of their own: the bot's no-network one, say
    offline = await sh(api, sid, "unshare --user --map-root-user --net -- cat /proc/net/dev")
    assert offline["exit_code"] == 0, offline["stderr"]
    assert [line.split(":")[0].strip() for line in offline["stdout"].splitlines()[2:]] == ["lo"]


async def test_the_disk_is_the_vms_own_and_outlasts_commands(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox_root: Path
) -> None:
    sid = await running(api)
    made = await sh(api, sid, "echo w > /buddy/work/w; echo d > /buddy/data/d; echo t > /tmp/t")
    assert made["exit_code"] == 0, made["stderr"]
    seen = await sh(api, sid, "cat /buddy/work/w /buddy/data/d /tmp/t; ls /buddy/work")
    assert seen["stdout"] == "w\nd\nt\nw\n"  # no folders of the bot's made for it
    assert (await sh(api, sid, "sudo -n true"))["exit_code"] != 0  # no root to lean on
    assert (await sh(api, sid, "ls /etc/shadow && cat /etc/shadow"))["stdout"] == "/etc/shadow\n"
    outside = await sh(api, sid, f"ls {sandbox_root}")
    assert outside["exit_code"] != 0  # the host's folders are not there

    assert (await api.post(f"/sandboxes/{sid}/stop", json={})).status_code == 200
    await wait_status(api, sid, "STOPPED")
    assert (await api.post(f"/sandboxes/{sid}/start", json={})).status_code == 200
    await wait_ready(api, sid)
    after = await sh(api, sid, "cat /buddy/work/w /buddy/data/d; ls -A /tmp")
    assert after["stdout"] == "w\nd\n"  # the disk stays; /tmp starts empty


# -- RESTORING


async def test_a_start_after_a_stop_passes_through_restoring(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    sid = await running(api)
    await api.post(f"/sandboxes/{sid}/stop", json={})
    await wait_status(api, sid, "STOPPED")
    await api.post(f"/sandboxes/{sid}/start", json={})
    view = await wait_status(api, sid, "RESTORING")
    assert view["setup_status"] == "SUCCESS"  # its first boot is long over
    for refused in (
        await api.get(f"/sandboxes/{sid}/content/buddy/work"),
        await api.patch(f"/sandboxes/{sid}", json={"timeout": 900}),
        await api.post(f"/sandboxes/{sid}/exec", json={"command": "true"}),
    ):
        assert refused.status_code == 400, refused.text
    held = await api.post(f"/sandboxes/{sid}/commands", json={"command": "echo held"})
    assert held.status_code == 200  # a tracked command waits for RUNNING
    assert buddy.sandboxes[sid].status == "RUNNING"
    # a restart of a running sandbox keeps its disk attached
    await api.post(f"/sandboxes/{sid}/restart", json={})
    await wait_ready(api, sid)
    statuses = [status for _, status, _ in buddy.sandboxes[sid].history]
    assert statuses[-6:] == ["STOPPED", "STARTING", "RESTORING", "RUNNING", "STARTING", "RUNNING"]


async def test_a_sandbox_made_from_a_snapshot_is_restoring_first(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    sid = await running(api)
    await sh(api, sid, "echo kept > /buddy/work/kept")
    snap = (await api.post(f"/sandboxes/{sid}/snapshots", json={})).json()["id"]
    for _ in range(500):  # polled for a condition on the server
        if (await api.get(f"/sandboxes/{sid}/snapshots/{snap}")).json()["status"] == "CREATED":
            break
        await asyncio.sleep(0.02)
    made = await api.post(
        "/sandboxes?project_name=analytics", json={"name": "copy", "snapshot_id": snap}
    )
    assert made.json()["status"] == "STARTING"
    copy = made.json()["id"]
    view = await wait_status(api, copy, "RESTORING")
    assert view["setup_status"] == "INPROGRESS"
    refused = await api.get(f"/sandboxes/{copy}/content/buddy/work")
    assert (refused.status_code, message(refused)) == (400, "Instance is not running")
    await wait_ready(api, copy)
    assert (await sh(api, copy, "cat /buddy/work/kept"))["stdout"] == "kept\n"


def test_a_download_broken_off_leaves_no_cat_behind(sandbox_root: Path) -> None:
    """A file read that stops early kills its `cat` and waits for it, pipe and all: no
    process transport is left to be collected after the event loop closed."""

    async def read_one_chunk() -> None:
        vm = Vm(sandbox_root / "vm", "sbx")
        (vm.work / "big.bin").write_bytes(os.urandom(4 << 20))  # far more than the pipe holds
        chunks = vm.read(f"{WORK_DIR}/big.bin")
        assert await anext(chunks)
        await chunks.aclose()  # the client went away

    assert unraisable_after(read_one_chunk()) == []
