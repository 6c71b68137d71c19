"""The fake Buddy as strict as the service: unknown body fields, snapshots it did not make,
token scopes and rate limits are refused as the document says Buddy refuses them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.buddy_client import (
    BOOT_S,
    CREATE,
    REPO_URL,
    client_for,
    create,
    make_repo,
    message,
    running,
    wait_ready,
    wait_status,
)
from tests.fakes.buddy import FakeBuddy
from tests.fakes.buddy.access import RateLimit


@pytest.fixture
async def buddy(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=BOOT_S) as fake:
        yield fake


@pytest.fixture
async def api(buddy: FakeBuddy) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(buddy) as client:
        yield client


@pytest.fixture
async def sandbox(api: httpx.AsyncClient) -> dict[str, Any]:
    return await wait_ready(api, (await create(api)).json()["id"])


async def exec_(api: httpx.AsyncClient, sid: str, command: str) -> httpx.Response:
    return await api.post(f"/sandboxes/{sid}/exec", json={"command": command})


async def snapshot_created(api: httpx.AsyncClient, sid: str, snap_id: str) -> None:
    url = f"/sandboxes/{sid}/snapshots/{snap_id}"
    async with asyncio.timeout(10):
        while (await api.get(url)).json()["status"] == "CREATING":  # noqa: ASYNC110
            await asyncio.sleep(0.02)


# -- request bodies


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "os": "ubuntu:24.04", "timout": 600}, "timout"),
        ({"name": "x", "os": "ubuntu:24.04", "agent_note": "n"}, "agent_note"),
        ({"name": "x", "snapshot_id": "abc", "fetch": []}, "fetch"),  # not for a snapshot
        ({"name": "x", "snapshot_id": "abc", "note": "n"}, "note"),
        ({"name": "x", "source_sandbox_id": "abc", "tags": []}, "tags"),
    ],
)
async def test_create_refuses_fields_it_does_not_know(
    api: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    response = await api.post(CREATE, json=body)
    assert response.status_code == 400
    assert message(response).startswith(f"Unrecognized field '{field}'")


async def test_update_and_command_refuse_fields_they_do_not_know(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    patch = await api.patch(f"/sandboxes/{sid}", json={"timeout": 60, "os": "ubuntu:22.04"})
    assert (patch.status_code, message(patch)) == (
        400,
        "Unrecognized field 'os' in an update request",
    )
    assert sandbox["os"] == (await api.get(f"/sandboxes/{sid}")).json()["os"]  # unchanged
    ok = await api.patch(f"/sandboxes/{sid}", json={"agent_note": "n", "apps": [{"command": "a"}]})
    assert ok.status_code == 200 and ok.json()["apps"][0]["command"] == "a"
    command = await api.post(f"/sandboxes/{sid}/commands", json={"command": "pwd", "cwd": "/"})
    assert (command.status_code, message(command)) == (
        400,
        "Unrecognized field 'cwd' in a command",
    )


# -- snapshots


async def test_an_unknown_snapshot_is_404(api: httpx.AsyncClient) -> None:
    response = await api.post(CREATE, json={"snapshot_id": "nosuchsnapshot", "name": "x"})
    assert (response.status_code, message(response)) == (404, "Snapshot not found")
    assert (await api.get("/sandboxes?project_name=analytics")).json()["sandboxes"] == []


async def test_a_snapshot_restores_its_sandboxs_disk(sandbox_root: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "sales")
    buddy = FakeBuddy(sandbox_root, boot_delay_s=BOOT_S, repos={REPO_URL: repo})
    async with buddy, client_for(buddy) as api:
        fetch = [{"type": "PUBLIC_REPO", "repository": REPO_URL, "path": "/buddy/data"}]
        source = await wait_ready(api, (await create(api, fetch=fetch)).json()["id"])
        sid = source["id"]
        write = "mkdir -p /buddy/work/deep && echo before > /buddy/work/deep/a.txt"
        assert (await exec_(api, sid, write)).status_code == 200

        taken = await api.post(f"/sandboxes/{sid}/snapshots", json={"name": "prepared"})
        assert (taken.status_code, taken.json()["status"]) == (201, "CREATING")
        snap_id = taken.json()["id"]
        busy = await api.patch(f"/sandboxes/{sid}", json={"timeout": 60})
        early = await api.post(CREATE, json={"snapshot_id": snap_id, "name": "too soon"})
        assert (busy.status_code, early.status_code) == (400, 400)  # while it is taken
        await snapshot_created(api, sid, snap_id)
        await exec_(api, sid, "echo after > /buddy/work/deep/a.txt; echo new > /buddy/work/b.txt")

        made = await api.post(CREATE, json={"snapshot_id": snap_id, "name": "restored"})
        assert made.status_code == 201
        restored = await wait_ready(api, made.json()["id"])
        assert restored["setup_status"] == "SUCCESS"
        rid = restored["id"]
        kept = await api.get(f"/sandboxes/{rid}/download/buddy/work/deep/a.txt")
        assert kept.content == b"before\n"  # as it was when the snapshot was taken
        later = await api.get(f"/sandboxes/{rid}/download/buddy/work/b.txt")
        assert later.status_code == 400  # written after the snapshot
        readme = await api.get(f"/sandboxes/{rid}/download/buddy/data/README.md")
        assert readme.content == b"# sales data\n"

        listed = (await api.get("/sandboxes/snapshots?project_name=analytics")).json()
        assert [s["id"] for s in listed["snapshots"]] == [snap_id]
        assert (await api.delete(f"/sandboxes/{sid}/snapshots/{snap_id}")).status_code == 204
        gone = await api.post(CREATE, json={"snapshot_id": snap_id, "name": "again"})
        assert gone.status_code == 404


async def test_a_stopped_sandbox_can_be_snapshotted(api: httpx.AsyncClient) -> None:
    sid = await running(api)
    await exec_(api, sid, "echo x > /buddy/work/x")
    await api.post(f"/sandboxes/{sid}/stop")
    await wait_status(api, sid, "STOPPED")
    taken = await api.post(f"/sandboxes/{sid}/snapshots")
    assert taken.status_code == 201


# -- token scopes


async def test_each_route_needs_its_scope(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=BOOT_S) as buddy, client_for(buddy) as api:
        sid = await running(api)
        buddy.scopes = {"SANDBOX_READ"}
        for response in (
            await create(api),
            await api.post(f"/sandboxes/{sid}/commands", json={"command": "true"}),
            await api.post(f"/sandboxes/{sid}/stop"),
            await api.delete(f"/sandboxes/{sid}"),
        ):
            assert (response.status_code, message(response)) == (
                403,
                "Insufficient scope: this token needs SANDBOX_WRITE",
            )
        assert (await api.get(f"/sandboxes/{sid}")).status_code == 200
        lookup = await api.get("/identifiers", params={"project": "analytics", "sandbox": "x"})
        assert message(lookup) == "Insufficient scope: this token needs WORKSPACE"
        buddy.scopes = {"SANDBOX_WRITE", "WORKSPACE"}
        read = await api.get(f"/sandboxes/{sid}/content/buddy/work")
        assert (read.status_code, message(read)) == (
            403,
            "Insufficient scope: this token needs SANDBOX_READ",
        )


# -- rate limits


async def test_every_answer_carries_the_rate_limit_headers(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    buddy.rate_limit = RateLimit(limit=5, window_s=30)
    first = await api.get(f"/sandboxes/{sid}")
    assert first.headers["x-rate-limit-limit"] == "5"
    assert first.headers["x-rate-limit-remaining"] == "4"
    reset = int(first.headers["x-rate-limit-reset"])
    assert time.time() < reset <= time.time() + 31
    cid = (await api.post(f"/sandboxes/{sid}/commands", json={"command": "echo hi"})).json()["id"]
    async with api.stream("GET", f"/sandboxes/{sid}/commands/{cid}/logs?follow=true") as logs:
        assert logs.headers["x-rate-limit-remaining"] == "2"  # a streamed answer too
        await logs.aread()
    missing = await api.get(f"/sandboxes/{sid}/content/buddy/work/nope")
    assert missing.headers["x-rate-limit-remaining"] == "1"  # errors too
    await api.get(f"/sandboxes/{sid}")
    limited = await api.get(f"/sandboxes/{sid}")
    assert (limited.status_code, message(limited)) == (429, "Too many requests")
    assert limited.headers["x-rate-limit-remaining"] == "0"
    assert int(limited.headers["x-rate-limit-reset"]) == reset
    assert "retry-after" not in limited.headers


async def test_the_default_limit_is_a_thousand_requests_an_hour(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    """The only figure Buddy's docs show (a budget of 1000), read per hour, the stricter."""
    first = await api.get(CREATE)
    assert first.headers["x-rate-limit-limit"] == "1000"
    assert first.headers["x-rate-limit-remaining"] == "999"
    reset = int(first.headers["x-rate-limit-reset"])
    assert time.time() + 3500 < reset <= time.time() + 3601
    for _ in range(999):
        assert (await api.get(CREATE)).status_code == 200
    limited = await api.get(CREATE)
    assert (limited.status_code, limited.headers["x-rate-limit-remaining"]) == (429, "0")
