"""The Buddy backend (`BuddyProvider`, `BuddySandbox`) against the fake Buddy server over
loopback: the exact requests each operation sends (the contract), and how faults on the
wire are survived or reported."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.errors import (
    SandboxConfigError,
    SandboxError,
    SandboxGone,
    SandboxPathError,
    SandboxUnavailable,
)
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider, BuddySandbox
from bot.sandbox.buddy.errors import GONE_MESSAGE, OutcomeUnknown
from bot.sandbox.buddy.scripts import first_boot_script
from tests.buddy_client import make_repo
from tests.fakes.buddy import FakeBuddy, RecordedRequest

TOKEN = "buddy-test-token"
SANDBOXES = "/workspaces/acme/sandboxes"
REPO_URL = "https://github.com/acme/sales-data"
JSON = "application/json"
RATE_LIMITED = r"^Buddy is rate limiting this token \(HTTP 429: Too many requests\) while "
SHORT_WAIT_S = 0.3  # request_timeout_s where a test needs the client to time out


@pytest.fixture
async def fake(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as buddy:
        yield buddy


def config_for(fake: FakeBuddy, **overrides: Any) -> BuddyConfig:
    values: dict[str, Any] = {
        "token": TOKEN,
        "workspace": "acme",
        "project": "analytics",
        "api_url": fake.base_url,
        "retry_base_delay_s": 0.01,
        "poll_interval_s": 0.02,
    }
    return BuddyConfig(**{**values, **overrides})


@contextlib.asynccontextmanager
async def provider_for(fake: FakeBuddy, **overrides: Any) -> AsyncIterator[BuddyProvider]:
    provider = BuddyProvider(config_for(fake, **overrides))
    try:
        yield provider
    finally:
        await provider.close()


@pytest.fixture
async def provider(fake: FakeBuddy) -> AsyncIterator[BuddyProvider]:
    async with provider_for(fake) as made:
        yield made


@pytest.fixture
async def sandbox(provider: BuddyProvider) -> BuddySandbox:
    return await provider.create(SandboxSpec("s1", tags=("bot",)))


def calls(requests: list[RecordedRequest]) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in requests]


def check_headers(request: RecordedRequest, accept: str = JSON) -> None:
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["accept"] == accept


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def read_all(stream: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in stream])


def free_port() -> int:
    """A loopback port nothing listens on (connecting to it is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def wait_for(condition: Callable[[], object], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


# -- contract: the requests each operation sends --


async def test_create_sends_the_documented_body(sandbox_root: Path, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "sales")
    buddy = FakeBuddy(sandbox_root, boot_delay_s=0.05, repos={REPO_URL: repo})
    async with buddy as fake, provider_for(fake, setup_command="echo set-up") as provider:
        spec = SandboxSpec("s1", repo_url=REPO_URL, tags=("bot", "session:s1"))
        sandbox = await provider.create(spec)
        readme = await read_all(sandbox.download("/buddy/data/README.md"))
    post = fake.requests[0]
    assert (post.method, post.path, post.query) == (
        "POST",
        SANDBOXES,
        {"project_name": "analytics"},
    )
    check_headers(post)
    assert post.headers["content-type"] == JSON
    identifier = post.json["identifier"]
    assert re.fullmatch(r"sci-[0-9a-f]{12}-[0-9a-f]{4}", identifier)
    assert post.json == {
        "name": "Code interpreter s1",
        "identifier": identifier,
        "os": "ubuntu:24.04",
        "resources": "1x2",
        "timeout": 900,
        "tags": ["bot", "session:s1"],
        "fetch": [{"type": "PUBLIC_REPO", "repository": REPO_URL, "path": "/buddy/data"}],
        "first_boot_commands": first_boot_script(make_data_dir=False, setup_command="echo set-up"),
    }
    assert readme == b"# sales data\n"  # fetched into /buddy/data
    assert fake.deleted == set()


async def test_create_without_a_repo_fetches_nothing(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    await provider.create(SandboxSpec("s1"))
    body = fake.requests[0].json
    assert "fetch" not in body and body["tags"] == []
    assert body["first_boot_commands"] == first_boot_script(make_data_dir=True)


async def test_create_polls_until_setup_succeeded_and_running(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    fake.running_lag_s = 0.3  # setup SUCCESS comes this long before status RUNNING
    sandbox = await provider.create(SandboxSpec("s1"))
    view = fake.sandboxes[sandbox.id]
    assert (view.status, view.setup_status) == ("RUNNING", "SUCCESS")
    polls = fake.requests[1:]
    assert len(polls) >= 2
    for request in polls:
        assert (request.method, request.path, request.query) == (
            "GET",
            f"{SANDBOXES}/{sandbox.id}",
            {},
        )
        check_headers(request)


async def test_run_code_requests(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    mark = len(fake.requests)
    code = "echo hello\necho boom >&2\nexit 1"
    result = await sandbox.run_code("bash", code, 10)
    assert (result.status, result.exit_code) == ("error", 1)
    assert (result.stdout.text, result.stderr.text) == ("hello\n", "boom\n")
    (command_id,) = fake.sandboxes[sandbox.id].commands
    commands = f"{SANDBOXES}/{sandbox.id}/commands"
    post, logs, *polls = fake.requests[mark:]
    assert (post.method, post.path, post.query) == ("POST", commands, {})
    check_headers(post)
    assert post.headers["content-type"] == JSON
    assert post.json["runtime"] == "BASH" and set(post.json) == {"command", "runtime"}
    assert post.json["command"].startswith("set -u\n") and code in post.json["command"]
    assert (logs.method, logs.path) == ("GET", f"{commands}/{command_id}/logs")
    assert logs.query == {"follow": "true"}
    check_headers(logs, accept="application/jsonl")
    assert polls and calls(polls) == [("GET", f"{commands}/{command_id}")] * len(polls)
    for poll in polls:
        check_headers(poll)
        assert poll.query == {}


async def test_detached_command_requests(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    mark = len(fake.requests)
    command_id = await sandbox.start_command("bash", "echo started; sleep 30")
    commands = f"{SANDBOXES}/{sandbox.id}/commands"
    assert calls(fake.requests[mark:]) == [("POST", commands)]
    assert fake.requests[mark].json["runtime"] == "BASH"

    mark = len(fake.requests)
    state = await sandbox.command_state(command_id)
    assert state.running
    get, logs = fake.requests[mark:]
    assert calls([get, logs]) == [
        ("GET", f"{commands}/{command_id}"),
        ("GET", f"{commands}/{command_id}/logs"),
    ]
    assert logs.query == {}  # the stored log, not followed
    check_headers(logs, accept="application/jsonl")

    mark = len(fake.requests)
    await sandbox.kill_command(command_id)
    get, terminate, *polls = fake.requests[mark:]
    assert calls([get, terminate]) == [
        ("GET", f"{commands}/{command_id}"),
        ("POST", f"{commands}/{command_id}/terminate"),
    ]
    assert terminate.json is None and terminate.query == {}
    assert polls and set(calls(polls)) == {("GET", f"{commands}/{command_id}")}
    killed = await sandbox.command_state(command_id)
    assert not killed.running
    assert (killed.result.status, killed.result.exit_code) == ("killed", None)


async def test_upload_requests(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    content = f"{SANDBOXES}/{sandbox.id}/content"
    data = bytes(range(256)) * 4 + b"\r\n--not-a-boundary\r\n"
    mark = len(fake.requests)
    written = await sandbox.upload(
        "/buddy/work/uploads/new dir/a.bin", chunks(data[:99], data[99:])
    )
    assert written == len(data)
    clear, folder, subfolder, upload = fake.requests[mark:]
    # first the links model code may have left in the way are removed, by a sync exec
    assert calls([clear]) == [("POST", f"{SANDBOXES}/{sandbox.id}/exec")]
    assert "rm -f -- a.bin" in clear.json["command"]
    # /buddy/work/uploads exists (the fake answers 409, which counts as success)
    assert calls([folder, subfolder]) == [
        ("POST", f"{content}/buddy/work/uploads"),
        ("POST", f"{content}/buddy/work/uploads/new dir"),
    ]
    assert folder.json == subfolder.json == {}
    assert (upload.method, upload.path) == (
        "POST",
        f"{content}/upload/buddy/work/uploads/new dir/a.bin",
    )
    check_headers(upload)
    assert upload.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert upload.headers["transfer-encoding"] == "chunked"  # streamed, never held whole
    assert "content-length" not in upload.headers
    # the fake takes exactly one part named `file`: the bytes landed through it
    assert await read_all(sandbox.download("/buddy/work/uploads/new dir/a.bin")) == data

    mark = len(fake.requests)
    await sandbox.upload("/buddy/work/uploads/new dir/b.csv", chunks(b"z"))
    assert calls(fake.requests[mark:]) == [  # the folders are known by now
        ("POST", f"{SANDBOXES}/{sandbox.id}/exec"),
        ("POST", f"{content}/upload/buddy/work/uploads/new dir/b.csv"),
    ]
    with pytest.raises(SandboxPathError, match="outside /buddy/work"):
        await sandbox.upload("/buddy/data/x", chunks(b""))
    assert len(fake.requests) == mark + 2


async def test_encoded_paths_reach_the_server_unchanged(
    fake: FakeBuddy, sandbox: BuddySandbox
) -> None:
    name = "a b#c?d%e+&=;'@$é.csv"
    await sandbox.upload(f"/buddy/work/{name}", chunks(b"odd"))
    upload = fake.requests[-1]
    assert upload.path == f"{SANDBOXES}/{sandbox.id}/content/upload/buddy/work/{name}"
    assert upload.query == {}
    assert name in [entry.name for entry in await sandbox.list_dir("/buddy/work")]
    assert await read_all(sandbox.download(f"/buddy/work/{name}")) == b"odd"


async def test_download_requests(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    payload = bytes(range(256)) * 4000
    await sandbox.upload("/buddy/work/blob.bin", chunks(payload))
    mark = len(fake.requests)
    assert await read_all(sandbox.download("/buddy/work/blob.bin")) == payload
    (download,) = fake.requests[mark:]
    assert (download.method, download.path, download.query) == (
        "GET",
        f"{SANDBOXES}/{sandbox.id}/download/buddy/work/blob.bin",
        {},
    )
    check_headers(download, accept="application/octet-stream")
    with pytest.raises(SandboxPathError, match="not a regular file"):
        await read_all(sandbox.download("/buddy/work/out"))  # Buddy sends a folder as tar.gz
    with pytest.raises(SandboxPathError, match=r"/buddy/work/nope\.txt does not exist"):
        await read_all(sandbox.download("/buddy/work/nope.txt"))


async def test_list_requests(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    await sandbox.upload("/buddy/work/a.csv", chunks(b"x,y\n"))
    mark = len(fake.requests)
    entries = await sandbox.list_dir("/buddy/work")
    assert [(e.name, e.kind, e.size) for e in entries] == [
        ("a.csv", "file", 4),
        ("out", "dir", 0),
        ("uploads", "dir", 0),
    ]
    (listing,) = fake.requests[mark:]
    assert calls([listing]) == [("GET", f"{SANDBOXES}/{sandbox.id}/content/buddy/work")]
    check_headers(listing)
    mark = len(fake.requests)
    with pytest.raises(SandboxPathError, match="is not a folder"):
        await sandbox.list_dir("/buddy/work/a.csv")
    assert len(fake.requests) == mark + 1  # a file is no sign of a vanished sandbox


async def test_list_tagged_reads_tags_of_our_sandboxes_only(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    ours = await provider.create(SandboxSpec("a", tags=("bot",)))
    untagged = await provider.create(SandboxSpec("b", tags=("other",)))
    deleted = await provider.create(SandboxSpec("d", tags=("bot",)))
    foreign = await provider.create(SandboxSpec("c", tags=("bot",)))
    fake.sandboxes[foreign.id].identifier = "someone-else"
    # d is deleted between the list and the read of its tags
    fake.fail_next(1, method="GET", path=f"/sandboxes/{deleted.id}$", status=404)
    mark = len(fake.requests)
    found = await provider.list_tagged("bot")
    assert [info.id for info in found] == [ours.id]
    assert found[0].created_at is not None and abs(found[0].created_at - time.time()) < 60
    listing, *reads = fake.requests[mark:]
    assert (listing.method, listing.path, listing.query) == (
        "GET",
        SANDBOXES,
        {"project_name": "analytics"},
    )
    assert sorted(calls(reads)) == sorted(
        ("GET", f"{SANDBOXES}/{sid}") for sid in (ours.id, untagged.id, deleted.id)
    )
    assert sorted([i.id for i in await provider.list_tagged("bot")]) == sorted(
        [ours.id, deleted.id]
    )


async def test_destroy_requests(
    fake: FakeBuddy, provider: BuddyProvider, sandbox: BuddySandbox
) -> None:
    mark = len(fake.requests)
    await sandbox.destroy()
    (delete,) = fake.requests[mark:]
    assert calls([delete]) == [("DELETE", f"{SANDBOXES}/{sandbox.id}")]
    assert delete.query == {} and delete.json is None
    check_headers(delete)
    assert sandbox.id in fake.deleted and sandbox.id not in fake.sandboxes
    await sandbox.destroy()  # idempotent: nothing sent
    assert len(fake.requests) == mark + 1
    await provider.destroy_id(sandbox.id)  # answered 404: already gone
    assert calls(fake.requests[mark + 1 :]) == [("DELETE", f"{SANDBOXES}/{sandbox.id}")]
    with pytest.raises(SandboxUnavailable, match="destroyed"):
        sandbox.download("/buddy/work/report.md")


# -- faults: survived --


async def test_reads_are_retried_on_5xx_and_network_errors(fake: FakeBuddy) -> None:
    async with provider_for(fake, request_timeout_s=SHORT_WAIT_S) as provider:
        sandbox = await provider.create(SandboxSpec("s1", tags=("bot",)))
        listing = r"/sandboxes$"
        fake.fail_next(1, method="GET", path=listing, status=503)
        fake.fail_next(1, method="GET", path=listing, delay_s=0.6)  # read timeout
        fake.fail_next(1, method="GET", path=listing, drop=True)  # connection dropped
        assert [i.id for i in await provider.list_tagged("bot")] == [sandbox.id]
    lists = fake.requests_to("GET", listing)
    assert len(lists) == 4
    for request in lists:
        check_headers(request)


async def test_a_5xx_burst_on_reads_is_survived(fake: FakeBuddy, provider: BuddyProvider) -> None:
    fake.fail_next(3, method="GET", path=r"/sandboxes/\w+$", status=503)  # readiness polls
    sandbox = await provider.create(SandboxSpec("s1"))
    fake.fail_next(3, method="GET", path=r"/logs$", status=502)
    fake.fail_next(3, method="GET", path=r"/commands/\w+$", status=503)
    result = await sandbox.run_code("bash", "echo ok; echo warn >&2", 10)
    assert (result.status, result.stdout.text, result.stderr.text) == ("ok", "ok\n", "warn\n")
    assert len(fake.requests_to("GET", r"/logs$")) == 4
    assert len(fake.requests_to("POST", r"/commands$")) == 1
    fake.fail_next(3, method="GET", path=r"/download/", status=500)
    await sandbox.upload("/buddy/work/a.txt", chunks(b"abc"))
    assert await read_all(sandbox.download("/buddy/work/a.txt")) == b"abc"


async def test_429_is_waited_out_until_the_rate_limit_resets(
    fake: FakeBuddy, sandbox: BuddySandbox
) -> None:
    fake.fail_next(1, method="GET", path=r"/content/", status=429, reset_after=0.3)
    started = time.monotonic()
    await sandbox.list_dir("/buddy/work")
    assert time.monotonic() - started >= 0.3
    assert len(fake.requests_to("GET", r"/content/")) == 2
    # a refused command did not run, so its POST is sent again
    fake.fail_next(1, method="POST", path=r"/commands$", status=429, reset_after=0.2)
    started = time.monotonic()
    result = await sandbox.run_code("bash", "echo once", 10)
    assert time.monotonic() - started >= 0.2
    assert result.stdout.text == "once\n"
    assert len(fake.requests_to("POST", r"/commands$")) == 2
    assert len(fake.sandboxes[sandbox.id].commands) == 1


async def test_429_is_reported_after_three_waits(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    fake.fail_next(4, method="GET", path=r"/content/", status=429, reset_after=0.01)
    with pytest.raises(SandboxError, match=RATE_LIMITED + "listing"):
        await sandbox.list_dir("/buddy/work")
    assert len(fake.requests_to("GET", r"/content/")) == 4  # the first try and three waits


async def test_a_post_that_never_connected_is_resent(sandbox_root: Path) -> None:
    port = free_port()
    config = BuddyConfig(
        token=TOKEN,
        workspace="acme",
        project="analytics",
        api_url=f"http://127.0.0.1:{port}",
        retry_base_delay_s=0.3,
        poll_interval_s=0.02,
    )
    provider = BuddyProvider(config)
    started = time.monotonic()
    creating = asyncio.create_task(provider.create(SandboxSpec("s1")))
    await asyncio.sleep(0.1)  # the first POST is refused: no server yet
    try:
        async with FakeBuddy(sandbox_root, boot_delay_s=0.05, port=port) as fake:
            sandbox = await creating
            assert time.monotonic() - started >= 0.3  # it waited, then sent the POST again
            assert len(fake.requests_to("POST", r"/sandboxes$")) == 1
            assert list(fake.sandboxes) == [sandbox.id]
    finally:
        await provider.close()


# -- faults: reported --


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"status": 500, "message": "boom"}, r"Buddy server error while listing sandboxes.*boom"),
        ({"delay_s": 0.6}, rf"Buddy did not answer within {SHORT_WAIT_S} s while listing"),
        ({"drop": True}, r"the connection to the Buddy API at http://127\.0\.0\.1:\d+ broke"),
    ],
    ids=["5xx", "timeout", "drop"],
)
async def test_reads_give_up_after_four_attempts(
    fake: FakeBuddy, fault: dict[str, Any], message: str
) -> None:
    fake.fail_next(4, method="GET", path=r"/sandboxes$", **fault)
    async with provider_for(fake, request_timeout_s=SHORT_WAIT_S) as provider:
        with pytest.raises(SandboxError, match=message) as caught:
            [i.id for i in await provider.list_tagged("bot")]
    assert not isinstance(caught.value, OutcomeUnknown)
    assert len(fake.requests_to("GET", r"/sandboxes$")) == 4


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 502},
        {"drop": True},
        {"status": 503, "after": True},
        {"drop": True, "after": True},
        {"delay_s": 1.5, "after": True},  # a command's POST waits 4 x request_timeout_s
    ],
    ids=["5xx", "drop", "5xx-after-running", "lost-answer", "timeout"],
)
async def test_the_command_post_is_never_resent(fake: FakeBuddy, fault: dict[str, Any]) -> None:
    async with provider_for(fake, request_timeout_s=SHORT_WAIT_S) as provider:
        sandbox = await provider.create(SandboxSpec("s1"))
        fake.fail_next(1, method="POST", path=r"/commands$", **fault)
        with pytest.raises(SandboxError, match=r"^the command may or may not have run: "):
            await sandbox.run_code("bash", "echo 1", 10)
    assert len(fake.requests_to("POST", r"/commands$")) == 1
    ran = 1 if fault.get("after") else 0
    assert len(fake.sandboxes[sandbox.id].commands) == ran  # once at most
    assert fake.requests_to("GET", r"/logs$") == []  # no result is made up


async def test_a_streamed_upload_is_not_resent_on_429(
    fake: FakeBuddy, sandbox: BuddySandbox
) -> None:
    fake.fail_next(1, method="POST", path=r"/content/upload/", status=429, reset_after=0.01)
    with pytest.raises(SandboxError, match=RATE_LIMITED + "uploading"):
        await sandbox.upload("/buddy/work/a.csv", chunks(b"data"))
    assert len(fake.requests_to("POST", r"/content/upload/")) == 1
    assert "a.csv" not in [entry.name for entry in await sandbox.list_dir("/buddy/work")]


async def test_unreachable_api_names_the_url(fake: FakeBuddy) -> None:
    url = f"http://127.0.0.1:{free_port()}/api"
    async with provider_for(fake, api_url=url) as provider:
        with pytest.raises(SandboxError, match=f"cannot reach the Buddy API at {url}"):
            [i.id for i in await provider.list_tagged("bot")]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"api_enabled": False},
            r"The Buddy API is disabled in workspace 'acme' \(HTTP 403: API is disabled in "
            r"this workspace\): enable the developer API in the workspace settings\.",
        ),
        (
            {"token": "wrong-token"},
            r"Buddy rejected the API token \(HTTP 401: Invalid or expired token\): it is wrong "
            r"or has expired\. Check BUDDY_TOKEN\.",
        ),
        (
            {"project": "nope"},
            r"Buddy does not know workspace 'acme' or project 'nope' \(HTTP 404: Project "
            r"'nope' not found\)\. Check BUDDY_WORKSPACE .* and BUDDY_PROJECT\.",
        ),
        (
            {"workspace": "other"},
            r"Buddy does not know workspace 'other' or project 'analytics' \(HTTP 404: "
            r"Workspace not found\)\. Check BUDDY_WORKSPACE",
        ),
    ],
    ids=["api-disabled", "bad-token", "unknown-project", "unknown-workspace"],
)
async def test_configuration_problems_are_told_clearly(
    fake: FakeBuddy, setting: dict[str, Any], message: str
) -> None:
    fake.api_enabled = setting.pop("api_enabled", True)
    async with provider_for(fake, **setting) as provider:
        with pytest.raises(SandboxConfigError, match=f"^{message}") as caught:
            await provider.create(SandboxSpec("s1"))
    assert "wrong-token" not in str(caught.value)
    workspace = setting.get("workspace", "acme")
    assert calls(fake.requests) == [("POST", f"/workspaces/{workspace}/sandboxes")]  # no lookup
    assert fake.sandboxes == {}


async def test_the_token_never_appears_in_errors(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    fake.fail_next(1, method="GET", path=r"/content/", status=400, message=f"bad token {TOKEN}")
    with pytest.raises(SandboxError) as caught:
        await sandbox.list_dir("/buddy/work")
    assert TOKEN not in str(caught.value) and "[token]" in str(caught.value)


async def test_missing_path_and_vanished_sandbox_are_told_apart(
    fake: FakeBuddy, sandbox: BuddySandbox
) -> None:
    with pytest.raises(SandboxPathError, match=r"^/buddy/work/nope does not exist$"):
        await sandbox.list_dir("/buddy/work/nope")  # the sandbox is still there
    fake.vanish(sandbox.id)
    with pytest.raises(SandboxGone, match=f"^{re.escape(GONE_MESSAGE)}$"):
        await sandbox.list_dir("/buddy/work")
    mark = len(fake.requests)
    with pytest.raises(SandboxGone):  # remembered: no request needed
        await sandbox.run_code("python", "1", 5)
    assert len(fake.requests) == mark
    await sandbox.destroy()  # 404 on delete: already gone
    with pytest.raises(SandboxUnavailable, match="destroyed"):
        sandbox.download("/buddy/work/report.md")


async def test_a_sandbox_vanishing_mid_run_raises_sandbox_gone(
    fake: FakeBuddy, sandbox: BuddySandbox
) -> None:
    running = asyncio.create_task(sandbox.run_code("bash", "echo up; sleep 30", 60))
    await wait_for(lambda: fake.requests_to("GET", r"/logs$"))
    started = time.monotonic()
    fake.vanish(sandbox.id)
    with pytest.raises(SandboxGone) as caught:
        await running
    assert time.monotonic() - started < 10
    assert "no longer exists" in str(caught.value) and "fresh one" in str(caught.value)
    with pytest.raises(SandboxGone):
        await sandbox.list_dir("/buddy/work")


# -- faults: nothing left behind --


async def test_a_closed_provider_is_unavailable(
    fake: FakeBuddy, provider: BuddyProvider, sandbox: BuddySandbox
) -> None:
    await provider.close()
    mark = len(fake.requests)
    with pytest.raises(SandboxUnavailable, match="closed"):
        await sandbox.list_dir("/buddy/work")
    with pytest.raises(SandboxUnavailable, match="closed"):
        await provider.create(SandboxSpec("s2"))
    assert len(fake.requests) == mark


@pytest.mark.parametrize(
    ("setup", "repo_url", "shown"),
    [
        (
            "for i in $(seq 0 29); do echo step $i; done\n"
            "echo 'E: Unable to locate package nope' >&2; exit 100",
            None,
            "Unable to locate package nope",
        ),
        (None, "https://github.com/acme/unknown", "Fetch failed: repository"),
    ],
    ids=["first-boot-commands", "fetch"],
)
async def test_a_failed_setup_is_shown_and_deleted(
    fake: FakeBuddy, setup: str | None, repo_url: str | None, shown: str
) -> None:
    async with provider_for(fake, setup_command=setup) as provider:
        with pytest.raises(SandboxUnavailable, match="setup commands failed") as caught:
            await provider.create(SandboxSpec("s1", repo_url=repo_url))
    assert shown in str(caught.value)
    assert "step 0" not in str(caught.value)  # only the last boot log lines
    (sandbox_id,) = fake.deleted
    assert fake.sandboxes == {}
    assert calls(fake.requests[-1:]) == [("DELETE", f"{SANDBOXES}/{sandbox_id}")]


async def test_a_ready_timeout_deletes_the_sandbox(fake: FakeBuddy) -> None:
    fake.boot_delay_s = 5
    async with provider_for(fake, ready_timeout_s=0.3) as provider:
        with pytest.raises(SandboxUnavailable, match=r"not ready after 0\.3 s \(status STARTING"):
            await provider.create(SandboxSpec("s1"))
    (sandbox_id,) = fake.deleted
    assert fake.sandboxes == {}
    assert calls(fake.requests[-1:]) == [("DELETE", f"{SANDBOXES}/{sandbox_id}")]


@pytest.mark.parametrize(
    "fault",
    [{"drop": True}, {"status": 502}, {"delay_s": 1.5}],
    ids=["lost-answer", "5xx", "timeout"],
)
async def test_create_with_unknown_outcome_finds_and_deletes_the_sandbox(
    fake: FakeBuddy, fault: dict[str, Any]
) -> None:
    fake.fail_next(1, method="POST", path=r"/sandboxes$", after=True, **fault)
    async with provider_for(fake, request_timeout_s=0.5) as provider:  # create: 1 s
        with pytest.raises(SandboxUnavailable, match=r"^creating the sandbox failed"):
            await provider.create(SandboxSpec("s1"))
    (post,) = fake.requests_to("POST", r"/sandboxes$")  # never resent
    (lookup,) = fake.requests_to("GET", r"/identifiers$")
    assert lookup.query == {"sandbox": post.json["identifier"], "project": "analytics"}
    (sandbox_id,) = fake.deleted
    assert fake.sandboxes == {}
    assert ("DELETE", f"{SANDBOXES}/{sandbox_id}") in calls(fake.requests)


async def test_create_lookup_falls_back_to_listing(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    other = await provider.create(SandboxSpec("other"))
    fake.fail_next(1, method="POST", path=r"/sandboxes$", status=504, after=True)
    fake.fail_next(1, method="GET", path=r"/identifiers$", status=404)  # an older server
    with pytest.raises(SandboxUnavailable, match="creating the sandbox failed"):
        await provider.create(SandboxSpec("s1"))
    assert list(fake.sandboxes) == [other.id]
    (sandbox_id,) = fake.deleted
    assert calls(fake.requests[-2:]) == [
        ("GET", SANDBOXES),
        ("DELETE", f"{SANDBOXES}/{sandbox_id}"),
    ]


async def test_cancelled_create_deletes_the_sandbox(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    fake.boot_delay_s = 5
    creating = asyncio.create_task(provider.create(SandboxSpec("s1")))
    await wait_for(lambda: fake.requests_to("GET", r"/sandboxes/\w+$"))  # booting: polled
    creating.cancel()
    with pytest.raises(asyncio.CancelledError):
        await creating
    (sandbox_id,) = fake.deleted
    assert fake.sandboxes == {}
    assert calls(fake.requests[-1:]) == [("DELETE", f"{SANDBOXES}/{sandbox_id}")]


async def test_destroy_is_idempotent_and_checks_after_a_lost_answer(
    fake: FakeBuddy, provider: BuddyProvider, sandbox: BuddySandbox
) -> None:
    url = f"{SANDBOXES}/{sandbox.id}"
    fake.fail_next(1, method="DELETE", status=502)  # not deleted
    mark = len(fake.requests)
    with pytest.raises(SandboxError, match=f"could not delete sandbox {sandbox.id}"):
        await sandbox.destroy()
    assert calls(fake.requests[mark:]) == [("DELETE", url), ("GET", url)]  # never resent
    assert sandbox.id in fake.sandboxes
    fake.fail_next(1, method="DELETE", drop=True, after=True)  # deleted, answer lost
    mark = len(fake.requests)
    await sandbox.destroy()  # a later destroy may succeed
    assert calls(fake.requests[mark:]) == [("DELETE", url), ("GET", url)]
    assert fake.sandboxes == {} and fake.deleted == {sandbox.id}
    await sandbox.destroy()
    assert len(fake.requests) == mark + 2
