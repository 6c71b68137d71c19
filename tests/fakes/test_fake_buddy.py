"""The fake Buddy Sandbox API, driven with plain httpx: the contract the bot's client relies on."""

from __future__ import annotations

import asyncio
import io
import json
import os
import socket
import tarfile
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
    logs,
    make_repo,
    message,
    start,
    wait_command,
    wait_ready,
)
from tests.fakes.buddy import FakeBuddy


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


# -- access


async def test_requests_need_the_bearer_token(buddy: FakeBuddy) -> None:
    async with client_for(buddy, token="wrong") as bad:
        response = await bad.get(CREATE)
    assert response.status_code == 401
    assert message(response)
    async with httpx.AsyncClient() as bare:
        assert (await bare.get(f"{buddy.base_url}/workspaces/acme{CREATE}")).status_code == 401
    assert [r.headers.get("authorization") for r in buddy.requests] == ["Bearer wrong", None]


async def test_disabled_api_answers_403(buddy: FakeBuddy, api: httpx.AsyncClient) -> None:
    buddy.api_enabled = False
    response = await api.get(CREATE)
    assert response.status_code == 403
    assert response.json() == {"errors": [{"message": "API is disabled in this workspace"}]}


async def test_unknown_workspace_and_project_are_404(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    assert (await api.get("/sandboxes?project_name=nope")).status_code == 404
    assert (await api.post("/sandboxes?project_name=nope", json={})).status_code == 404
    other = await api.get(f"{buddy.base_url}/workspaces/other/sandboxes?project_name=analytics")
    assert other.status_code == 404
    assert message(other)


# -- sandboxes


async def test_create_boots_from_starting_to_running(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    response = await create(api, identifier="run-1", tags=["bot"], timeout=600)
    assert response.status_code == 201
    created = response.json()
    assert (created["status"], created["setup_status"]) == ("STARTING", "INPROGRESS")
    assert len(created["id"]) == 13 and created["id"].isalnum()
    assert created["url"] == f"{buddy.base_url}/workspaces/acme/sandboxes/{created['id']}"
    assert created["create_date"].endswith("Z")
    view = await wait_ready(api, created["id"])
    assert (view["status"], view["setup_status"]) == ("RUNNING", "SUCCESS")
    assert (view["identifier"], view["tags"], view["timeout"]) == ("run-1", ["bot"], 600)
    assert buddy.sandboxes[created["id"]].status == "RUNNING"
    assert buddy.requests[0].json == {
        "name": "Test sandbox",
        "os": "ubuntu:24.04",
        "identifier": "run-1",
        "tags": ["bot"],
        "timeout": 600,
    }


async def test_create_validates_the_body(api: httpx.AsyncClient) -> None:
    assert (await api.post(CREATE, json={"name": "x"})).status_code == 400  # os missing
    assert (await create(api, os="windows")).status_code == 400
    assert (await create(api, identifier="-bad")).status_code == 400
    assert (await create(api, timeout="soon")).status_code == 400
    assert (
        await api.post("/sandboxes", json={"name": "x", "os": "ubuntu:24.04"})
    ).status_code == 400
    assert (await api.post(CREATE, json={"snapshot_id": "snap1"})).status_code == 400  # no name
    assert (await create(api, identifier="same")).status_code == 201
    duplicate = await create(api, identifier="same")
    assert duplicate.status_code == 400
    assert "'identifier' must be unique" in message(duplicate)


async def test_unknown_and_malformed_ids(api: httpx.AsyncClient) -> None:
    missing = await api.get("/sandboxes/abcdefghijklm")
    assert missing.status_code == 404
    malformed = await api.get("/sandboxes/nope")
    assert (malformed.status_code, message(malformed)) == (400, "Invalid url")


async def test_list_shows_id_views_without_tags(api: httpx.AsyncClient) -> None:
    first = (await create(api, identifier="one", tags=["a"])).json()
    second = (await create(api, identifier="two")).json()
    listing = (await api.get(CREATE)).json()
    assert [s["id"] for s in listing["sandboxes"]] == [first["id"], second["id"]]
    keys = {"url", "html_url", "id", "identifier", "name", "status", "setup_status"}
    assert all(set(item) == keys for item in listing["sandboxes"])


async def test_identifiers_resolve_to_ids(api: httpx.AsyncClient) -> None:
    sid = (await create(api, identifier="agent-7")).json()["id"]
    found = await api.get("/identifiers", params={"project": "analytics", "sandbox": "agent-7"})
    assert found.status_code == 200
    assert found.json()["sandbox_id"] == sid
    assert found.json()["project_identifier"] == "analytics"
    absent = await api.get("/identifiers", params={"project": "analytics", "sandbox": "ghost"})
    assert absent.status_code == 200
    assert "sandbox_id" not in absent.json()


async def test_update_timeout_and_tags(api: httpx.AsyncClient, sandbox: dict[str, Any]) -> None:
    response = await api.patch(f"/sandboxes/{sandbox['id']}", json={"timeout": 1200, "tags": ["x"]})
    assert response.status_code == 200
    assert (response.json()["timeout"], response.json()["tags"]) == (1200, ["x"])


async def test_delete_then_everything_is_404(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    cid = await start(api, sid, "sleep 30")
    assert (await api.delete(f"/sandboxes/{sid}")).status_code == 204
    assert (await api.get(f"/sandboxes/{sid}")).status_code == 404
    assert (await api.get(f"/sandboxes/{sid}/commands/{cid}")).status_code == 404
    assert (
        await api.post(f"/sandboxes/{sid}/commands", json={"command": "true"})
    ).status_code == 404
    assert (await api.delete(f"/sandboxes/{sid}")).status_code == 404
    assert sid in buddy.deleted and sid not in buddy.sandboxes


async def test_vanish_removes_the_sandbox_behind_the_clients_back(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    cid = await start(api, sid, "echo up; sleep 30")
    stream = api.stream("GET", f"/sandboxes/{sid}/commands/{cid}/logs?follow=true")
    async with stream as response:
        lines = response.aiter_lines()
        assert json.loads(await anext(lines)) == {"type": "STDOUT", "data": "up"}
        buddy.vanish(sid)
        assert [line async for line in lines] == []  # the stream just ends
    assert (await api.get(f"/sandboxes/{sid}")).status_code == 404
    assert sid in buddy.deleted


# -- boot


async def test_file_calls_and_exec_fail_while_booting(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.boot_delay_s = 0.5
    sid = (await create(api)).json()["id"]
    for response in (
        await api.get(f"/sandboxes/{sid}/content/buddy/work"),
        await api.get(f"/sandboxes/{sid}/download/buddy/work/x"),
        await api.post(f"/sandboxes/{sid}/exec", json={"command": "true"}),
    ):
        assert (response.status_code, message(response)) == (400, "Instance is not running")
    patch = await api.patch(f"/sandboxes/{sid}", json={"timeout": 60})
    assert (patch.status_code, message(patch)) == (
        400,
        "Cannot update sandbox, operation in progress",
    )


async def test_command_is_held_until_the_sandbox_runs(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.boot_delay_s = 0.4
    sid = (await create(api)).json()["id"]
    started = time.monotonic()
    cid = await start(api, sid, "echo ran")
    assert time.monotonic() - started >= 0.35
    assert buddy.sandboxes[sid].status == "RUNNING"
    assert (await wait_command(api, sid, cid))["status"] == "SUCCESSFUL"
    assert await logs(api, sid, cid) == [{"type": "STDOUT", "data": "ran"}]


async def test_held_command_gets_404_when_the_sandbox_is_deleted(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.boot_delay_s = 0.5
    sid = (await create(api)).json()["id"]
    held = asyncio.create_task(api.post(f"/sandboxes/{sid}/commands", json={"command": "true"}))
    await asyncio.sleep(0.1)
    assert (await api.delete(f"/sandboxes/{sid}")).status_code == 204
    assert (await held).status_code == 404


async def test_fetch_checks_out_a_mapped_repository(sandbox_root: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "sales")
    buddy = FakeBuddy(sandbox_root, boot_delay_s=BOOT_S, repos={REPO_URL: repo})
    async with buddy, client_for(buddy) as api:
        fetch = [{"type": "PUBLIC_REPO", "repository": REPO_URL, "path": "/buddy/data"}]
        sid = (await create(api, fetch=fetch)).json()["id"]
        view = await wait_ready(api, sid)
        assert view["setup_status"] == "SUCCESS"
        assert view["fetch"] == fetch
        readme = await api.get(f"/sandboxes/{sid}/download/buddy/data/README.md")
        assert readme.content == b"# sales data\n"

        other = [{"type": "PUBLIC_REPO", "repository": "https://github.com/acme/unknown"}]
        failed = await wait_ready(api, (await create(api, fetch=other)).json()["id"])
        assert failed["setup_status"] == "FAILED"
        assert any("acme/unknown" in line for line in failed["boot_logs"])


async def test_first_boot_commands_run_and_can_fail(api: httpx.AsyncClient) -> None:
    ok = (await create(api, first_boot_commands="echo ready > /buddy/work/marker")).json()
    assert (await wait_ready(api, ok["id"]))["setup_status"] == "SUCCESS"
    marker = await api.get(f"/sandboxes/{ok['id']}/download/buddy/work/marker")
    assert marker.content == b"ready\n"

    script = "echo installing\necho broken >&2\nexit 4\necho never"
    bad = await wait_ready(api, (await create(api, first_boot_commands=script)).json()["id"])
    assert bad["setup_status"] == "FAILED"
    assert {"installing", "broken"} <= set(bad["boot_logs"])
    assert "never" not in bad["boot_logs"]
    assert any("exit code 4" in line for line in bad["boot_logs"])


# -- commands


async def test_command_output_is_split_into_stdout_and_stderr(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    response = await api.post(
        f"/sandboxes/{sid}/commands", json={"command": "echo out; echo err >&2"}
    )
    view = response.json()
    assert (view["status"], view["exit_code"], view["runtime"]) == ("INPROGRESS", None, "BASH")
    assert view["logs_url"] == f"{view['url']}/logs"
    done = await wait_command(api, sid, view["id"])
    assert (done["status"], done["exit_code"]) == ("SUCCESSFUL", 0)
    assert done["finish_date"]
    records = await logs(api, sid, view["id"])
    assert sorted(records, key=lambda r: r["type"]) == [
        {"type": "STDERR", "data": "err"},
        {"type": "STDOUT", "data": "out"},
    ]
    history = (await api.get(f"/sandboxes/{sid}/commands")).json()["commands"]
    assert [c["id"] for c in history] == [view["id"]]
    assert buddy.sandboxes[sid].commands[view["id"]].status == "SUCCESSFUL"


async def test_log_records_are_split_on_newlines_only(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    """Records are raw UTF-8 JSON: U+2028 inside `data` must not split a record."""
    sid = sandbox["id"]
    cid = await start(api, sid, "print('a\\u2028b'); print(); print('é')", "PYTHON")
    await wait_command(api, sid, cid)
    raw = (await api.get(f"/sandboxes/{sid}/commands/{cid}/logs")).content
    assert "\u2028".encode() in raw
    records = [json.loads(line) for line in raw.split(b"\n") if line]
    assert [r["data"] for r in records] == ["a\u2028b", "", "é"]


async def test_command_history_is_newest_first_with_a_cursor(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    ids = [await start(api, sid, f"echo {n}") for n in range(3)]
    page = (await api.get(f"/sandboxes/{sid}/commands", params={"limit": 2})).json()["commands"]
    assert [c["id"] for c in page] == [ids[2], ids[1]]
    older = await api.get(f"/sandboxes/{sid}/commands", params={"cursor": ids[1]})
    assert [c["id"] for c in older.json()["commands"]] == [ids[0]]
    assert (await api.get(f"/sandboxes/{sid}/commands/nope")).status_code == 404


async def test_non_zero_exit_is_failed_with_its_code(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    cid = await start(api, sandbox["id"], "echo boom >&2; exit 3")
    done = await wait_command(api, sandbox["id"], cid)
    assert (done["status"], done["exit_code"]) == ("FAILED", 3)


async def test_python_and_javascript_runtimes(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    py = await start(api, sid, "print(sum(range(10)))", "PYTHON")
    js = await start(api, sid, "console.log(6 * 7)", "JAVASCRIPT")
    for cid, expected in ((py, "45"), (js, "42")):
        await wait_command(api, sid, cid)
        assert await logs(api, sid, cid) == [{"type": "STDOUT", "data": expected}]
    ts = await api.post(
        f"/sandboxes/{sid}/commands", json={"command": "1", "runtime": "TYPESCRIPT"}
    )
    assert ts.status_code == 400


async def test_follow_streams_lines_live_and_status_lags(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    buddy.status_lag_s = 0.5
    sid = sandbox["id"]
    cid = await start(api, sid, "echo first; sleep 1; echo second >&2; printf tail")
    url = f"/sandboxes/{sid}/commands/{cid}/logs"
    async with api.stream("GET", url, params={"follow": "true"}) as response:
        assert response.headers["content-type"].startswith("application/jsonl")
        lines = response.aiter_lines()
        assert json.loads(await anext(lines)) == {"type": "STDOUT", "data": "first"}
        first_at = time.monotonic()
        running = (await api.get(f"/sandboxes/{sid}/commands/{cid}")).json()
        assert running["status"] == "INPROGRESS"
        rest = [json.loads(line) async for line in lines if line]
        # live: the first line came while the command still slept before the others (a
        # lower bound on the gap, which a slow machine only widens)
        assert time.monotonic() - first_at > 0.5
    assert sorted(rest, key=lambda r: r["type"]) == [
        {"type": "STDERR", "data": "second"},
        {"type": "STDOUT", "data": "tail"},
    ]
    just_after = (await api.get(f"/sandboxes/{sid}/commands/{cid}")).json()
    assert (just_after["status"], just_after["exit_code"]) == ("INPROGRESS", None)
    done = await wait_command(api, sid, cid)
    assert (done["status"], done["exit_code"]) == ("SUCCESSFUL", 0)


async def test_terminate_kills_a_sleeping_command(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    cid = await start(api, sid, "sleep 30")
    started = time.monotonic()
    response = await api.post(f"/sandboxes/{sid}/commands/{cid}/terminate")
    assert response.status_code == 200
    done = await wait_command(api, sid, cid)
    assert (done["status"], done["exit_code"]) == ("FAILED", 137)
    assert time.monotonic() - started < 5


async def test_exec_returns_output_and_has_a_ceiling(
    buddy: FakeBuddy, api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    body = {"command": "echo hi; echo boom >&2; exit 3", "runtime": "BASH"}
    response = await api.post(f"/sandboxes/{sid}/exec", json=body)
    assert response.status_code == 200
    assert response.json() == {**body, "exit_code": 3, "stdout": "hi\n", "stderr": "boom\n"}
    fast = await api.post(f"/sandboxes/{sid}/commands?fast=true", json={"command": "echo quick"})
    assert fast.json()["stdout"] == "quick\n"

    buddy.exec_timeout_s = 1
    slow = await api.post(f"/sandboxes/{sid}/exec", json={"command": "sleep 10"})
    assert slow.status_code == 400
    assert "did not finish" in message(slow) and "within 1s" in message(slow)
    assert (await api.get(f"/sandboxes/{sid}/commands")).json()["commands"] == []


# -- files


async def test_upload_download_and_list(api: httpx.AsyncClient, sandbox: dict[str, Any]) -> None:
    sid = sandbox["id"]
    data = os.urandom(3 << 20) + bytes([0, 1, 2, 0xFF, 0xFE, 0xFD])
    files = {"file": ("blob.bin", data, "application/octet-stream")}
    # a new sandbox has /buddy/work, not the bot's folders in it
    assert (await api.post(f"/sandboxes/{sid}/content/buddy/work/uploads")).status_code == 201
    uploaded = await api.post(
        f"/sandboxes/{sid}/content/upload/buddy/work/uploads/blob.bin", files=files
    )
    assert uploaded.status_code == 201
    item = uploaded.json()
    assert (item["type"], item["name"], item["path"], item["size"]) == (
        "FILE",
        "blob.bin",
        "/buddy/work/uploads/blob.bin",
        len(data),
    )

    download = await api.get(f"/sandboxes/{sid}/download/buddy/work/uploads/blob.bin")
    assert download.status_code == 200
    assert download.content == data
    assert 'filename="blob.bin"' in download.headers["content-disposition"]

    listing = (await api.get(f"/sandboxes/{sid}/content/buddy/work/uploads")).json()["contents"]
    assert [(i["type"], i["name"], i.get("size")) for i in listing] == [
        ("FILE", "blob.bin", len(data))
    ]
    stat = (await api.get(f"/sandboxes/{sid}/content/buddy/work/uploads/blob.bin")).json()
    assert [i["path"] for i in stat["contents"]] == ["/buddy/work/uploads/blob.bin"]
    root = (await api.get(f"/sandboxes/{sid}/content/")).json()["contents"]
    assert [i["path"] for i in root] == ["/buddy"]


async def test_upload_needs_an_existing_parent(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    files = {"file": ("a.txt", b"a", "application/octet-stream")}
    url = f"/sandboxes/{sandbox['id']}/content/upload/buddy/work/missing/a.txt"
    response = await api.post(url, files=files)
    assert response.status_code == 400


async def test_download_a_folder_as_tar_gz(api: httpx.AsyncClient, sandbox: dict[str, Any]) -> None:
    sid = sandbox["id"]
    script = "mkdir /buddy/work/out && echo hi > /buddy/work/out/a.txt"
    await api.post(f"/sandboxes/{sid}/exec", json={"command": script})
    response = await api.get(f"/sandboxes/{sid}/download/buddy/work/out")
    assert response.status_code == 200
    assert 'filename="out.tar.gz"' in response.headers["content-disposition"]
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as archive:
        assert archive.extractfile("./a.txt").read() == b"hi\n"  # type: ignore[union-attr]
    names = [
        i["name"]
        for i in (await api.get(f"/sandboxes/{sid}/content/buddy/work")).json()["contents"]
    ]
    assert not any(name.startswith(".buddy-download") for name in names)


async def test_mkdir_then_conflict(api: httpx.AsyncClient, sandbox: dict[str, Any]) -> None:
    url = f"/sandboxes/{sandbox['id']}/content/buddy/work/reports"
    created = await api.post(url, json={})
    assert created.status_code == 201
    assert (created.json()["type"], created.json()["path"]) == ("DIR", "/buddy/work/reports")
    assert (await api.post(url, json={})).status_code == 409
    nested = await api.post(f"/sandboxes/{sandbox['id']}/content/buddy/work/a/b", json={})
    assert nested.status_code == 400


async def test_missing_and_foreign_paths_are_400(
    api: httpx.AsyncClient, sandbox: dict[str, Any]
) -> None:
    sid = sandbox["id"]
    for response in (
        await api.get(f"/sandboxes/{sid}/content/buddy/work/nope"),
        await api.get(f"/sandboxes/{sid}/download/buddy/work/nope.txt"),
        await api.get(f"/sandboxes/{sid}/content/etc"),
    ):
        assert (response.status_code, message(response)) == (400, "Path not find in browser")
    doubled = await api.get(f"/sandboxes/{sid}/content//buddy/work")
    assert doubled.status_code == 400


# -- faults


async def test_fail_next_burst_then_success(buddy: FakeBuddy, api: httpx.AsyncClient) -> None:
    buddy.fail_next(2, method="GET", path=r"/sandboxes$")
    statuses = [(await api.get(CREATE)).status_code for _ in range(3)]
    assert statuses == [503, 503, 200]
    assert len(buddy.requests_to("GET", r"/sandboxes$")) == 3
    assert (await create(api)).status_code == 201  # POST did not match


async def test_fail_next_429_carries_the_rate_limit_reset(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.fail_next(1, status=429, reset_after=2, message="slow down")
    before = time.time()
    response = await api.get(CREATE)
    assert response.status_code == 429
    assert response.headers["x-rate-limit-remaining"] == "0"
    assert before + 2 <= int(response.headers["x-rate-limit-reset"]) <= time.time() + 3
    assert "retry-after" not in response.headers  # not something the document says Buddy sends
    assert message(response) == "slow down"


async def test_fail_next_drop_closes_the_connection(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.fail_next(1, path="/sandboxes", drop=True)
    with pytest.raises(httpx.TransportError):
        await api.get(CREATE)
    assert (await api.get(CREATE)).status_code == 200
    assert len(buddy.requests) == 2


async def test_fail_next_delay_holds_the_answer_back(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.fail_next(2, path="/sandboxes$", delay_s=0.4)
    with pytest.raises(httpx.ReadTimeout):
        await api.get(CREATE, timeout=0.1)  # an impatient client gives up
    started = time.monotonic()
    assert (await api.get(CREATE)).status_code == 503  # a patient one gets the fault
    assert time.monotonic() - started >= 0.4
    assert (await api.get(CREATE)).status_code == 200


async def test_fail_next_after_handles_the_request_then_loses_the_answer(
    buddy: FakeBuddy, api: httpx.AsyncClient
) -> None:
    buddy.fail_next(1, method="POST", after=True, drop=True)
    with pytest.raises(httpx.TransportError):
        await create(api, identifier="lost-1")
    buddy.fail_next(1, method="POST", after=True, status=502)
    assert (await create(api, identifier="lost-2")).status_code == 502
    made = [sb.identifier for sb in buddy.sandboxes.values()]
    assert made == ["lost-1", "lost-2"]  # both took effect
    assert [r.json["identifier"] for r in buddy.requests] == made


async def test_port_can_be_chosen(sandbox_root: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with FakeBuddy(sandbox_root, port=port) as fake, client_for(fake) as api:
        assert fake.base_url == f"http://127.0.0.1:{port}"
        assert (await api.get(CREATE)).status_code == 200
