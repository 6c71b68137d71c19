"""Plain httpx helpers for tests that drive the fake Buddy API directly."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx

from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from tests.fakes.buddy import FakeBuddy

TOKEN = "buddy-test-token"
CREATE = "/sandboxes?project_name=analytics"
BOOT_S = 0.05
REPO_URL = "https://github.com/acme/sales-data"


def client_for(buddy: FakeBuddy, token: str = TOKEN) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"{buddy.base_url}/workspaces/acme",
        headers={"Authorization": f"Bearer {token}"},
        timeout=20,
    )


async def create(api: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    body = {"name": "Test sandbox", "os": "ubuntu:24.04", **fields}
    return await api.post(CREATE, json=body)


async def wait_ready(api: httpx.AsyncClient, sid: str, timeout_s: float = 10) -> dict[str, Any]:
    """Poll until the boot is over: RUNNING, with setup SUCCESS or FAILED."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = (await api.get(f"/sandboxes/{sid}")).json()
        if view["status"] == "RUNNING" and view["setup_status"] != "INPROGRESS":
            return view
        await asyncio.sleep(0.02)
    raise AssertionError(f"sandbox {sid} did not boot")


async def running(api: httpx.AsyncClient) -> str:
    """A new sandbox, once it has booted: its id."""
    return (await wait_ready(api, (await create(api)).json()["id"]))["id"]


async def start(api: httpx.AsyncClient, sid: str, command: str, runtime: str = "BASH") -> str:
    response = await api.post(
        f"/sandboxes/{sid}/commands", json={"command": command, "runtime": runtime}
    )
    assert response.status_code == 200, response.text
    return response.json()["id"]


async def wait_command(api: httpx.AsyncClient, sid: str, cid: str) -> dict[str, Any]:
    for _ in range(500):
        view = (await api.get(f"/sandboxes/{sid}/commands/{cid}")).json()
        if view["status"] != "INPROGRESS":
            return view
        await asyncio.sleep(0.02)
    raise AssertionError(f"command {cid} did not finish")


async def logs(api: httpx.AsyncClient, sid: str, cid: str) -> list[dict[str, str]]:
    response = await api.get(f"/sandboxes/{sid}/commands/{cid}/logs")
    assert response.headers["content-type"].startswith("application/jsonl")
    return [json.loads(line) for line in response.text.splitlines() if line]


def message(response: httpx.Response) -> str:
    return response.json()["errors"][0]["message"]


def make_repo(folder: Path) -> Path:
    """A one-commit git repository with a README and a CSV."""
    git = shutil.which("git")
    assert git, "git is needed for the fetch tests"
    folder.mkdir()
    (folder / "README.md").write_text("# sales data\n")
    (folder / "sales.csv").write_text("region,total\nnorth,10\n")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(folder),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "data"]):
        subprocess.run([git, *args], cwd=folder, env=env, check=True)
    return folder


async def wait_status(
    api: httpx.AsyncClient, sid: str, status: str, timeout_s: float = 10
) -> dict[str, Any]:
    """Poll until the sandbox's status is `status`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = (await api.get(f"/sandboxes/{sid}")).json()
        if view["status"] == status:
            return view
        await asyncio.sleep(0.02)
    raise AssertionError(f"sandbox {sid} did not reach {status}")


def process_running(cmdline: bytes) -> bool:
    """Whether a process with exactly this command line runs on this host."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == cmdline:
                return True
        except OSError:
            continue
    return False


@contextlib.asynccontextmanager
async def provider_for(fake: FakeBuddy, timeout_s: int = 900) -> AsyncIterator[BuddyProvider]:
    """The bot's Buddy provider on the fake, polling fast."""
    config = BuddyConfig(
        token="buddy-test-token",
        workspace="acme",
        project="analytics",
        api_url=fake.base_url,
        retry_base_delay_s=0.01,
        poll_interval_s=0.02,
        timeout_s=timeout_s,
    )
    provider = BuddyProvider(config)
    try:
        yield provider
    finally:
        await provider.close()
