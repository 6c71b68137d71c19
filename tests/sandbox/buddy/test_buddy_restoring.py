"""The Buddy backend against a sandbox on its way back up: STARTING, then RESTORING while
its disk is attached again (the fake's reading of §4.1 and §6.1). File calls refused
meanwhile wait for it; commands are held by Buddy until it runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyProvider, BuddySandbox
from tests.buddy_client import client_for, provider_for, wait_status
from tests.fakes.buddy import FakeBuddy

RESTORE_S = 0.5  # long enough for a call to land in it; waited for, never slept


@pytest.fixture
async def fake(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05, restore_delay_s=RESTORE_S) as buddy:
        yield buddy


@pytest.fixture
async def provider(fake: FakeBuddy) -> AsyncIterator[BuddyProvider]:
    async with provider_for(fake) as made:
        yield made


@pytest.fixture
async def api(fake: FakeBuddy) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(fake) as client:
        yield client


async def restoring(api: httpx.AsyncClient, sandbox: BuddySandbox) -> None:
    """Stop the sandbox and start it again behind the bot's back (another replica, say),
    and wait until it is RESTORING."""
    assert (await api.post(f"/sandboxes/{sandbox.id}/stop", json={})).status_code == 200
    await wait_status(api, sandbox.id, "STOPPED")
    assert (await api.post(f"/sandboxes/{sandbox.id}/start", json={})).status_code == 200
    await wait_status(api, sandbox.id, "RESTORING")


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def read_all(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


async def listing(sandbox: BuddySandbox) -> object:
    return sorted(entry.name for entry in await sandbox.list_dir("/buddy/work"))


async def download(sandbox: BuddySandbox) -> object:
    return await read_all(sandbox.download("/buddy/work/out/kept.txt"))


async def upload(sandbox: BuddySandbox) -> object:
    """Into a new folder: its making is refused, before any byte is sent. (Into a known
    folder the bytes go at once, and cannot go again: that case is not recoverable.)"""
    await sandbox.upload("/buddy/work/uploads/new/new.txt", chunks(b"new\n"))
    return await read_all(sandbox.download("/buddy/work/uploads/new/new.txt"))


@pytest.mark.parametrize(
    ("call", "expected"),
    [(listing, ["out", "uploads"]), (download, b"kept\n"), (upload, b"new\n")],
    ids=["list", "download", "upload"],
)
async def test_a_file_call_during_restoring_waits_for_the_sandbox(
    fake: FakeBuddy,
    provider: BuddyProvider,
    api: httpx.AsyncClient,
    call: Callable[[BuddySandbox], Awaitable[object]],
    expected: object,
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    await sandbox.upload("/buddy/work/uploads/first.txt", chunks(b"1"))  # folders known
    await sandbox.run_code("bash", "echo kept > /buddy/work/out/kept.txt; rm -f ../uploads/*", 10)
    await restoring(api, sandbox)
    assert await call(sandbox) == expected
    assert fake.sandboxes[sandbox.id].status == "RUNNING"
    assert [r for r in fake.requests if r.status == 400]  # refused while RESTORING
    # the test's start only: the bot found the sandbox on its way up and waited
    assert len(fake.requests_to("POST", r"/start$")) == 1


async def test_a_command_during_restoring_is_held_and_runs_once(
    fake: FakeBuddy, provider: BuddyProvider, api: httpx.AsyncClient
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    await restoring(api, sandbox)
    result = await sandbox.run_code("bash", "echo ran", 10)
    assert (result.status, result.stdout.text) == ("ok", "ran\n")
    assert len(fake.sandboxes[sandbox.id].commands) == 1
    assert len(fake.requests_to("POST", r"/start$")) == 1  # the test's own


async def test_an_upload_after_a_long_idle_starts_the_stopped_sandbox_first(
    fake: FakeBuddy,
) -> None:
    """Buddy stopped the sandbox for inactivity while the bot knew its folders: the upload's
    bytes cannot be sent twice, so the bot makes sure it runs before sending them."""
    async with provider_for(fake, timeout_s=1) as provider:
        sandbox = await provider.create(SandboxSpec("s1"))
        await sandbox.upload("/buddy/work/uploads/a.txt", chunks(b"a"))
        async with client_for(fake) as api:  # the fake honours the sandbox's 1 s timeout
            await wait_status(api, sandbox.id, "STOPPED")
        await sandbox.upload("/buddy/work/uploads/b.txt", chunks(b"b\n"))
        assert await read_all(sandbox.download("/buddy/work/uploads/b.txt")) == b"b\n"
        assert [r.status for r in fake.requests_to("POST", r"/content/upload/")] == [201, 201]
        await sandbox.destroy()
