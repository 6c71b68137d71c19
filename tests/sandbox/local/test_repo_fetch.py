"""The /analyze checkout over real HTTP: git connects only to the address that was checked
(no second lookup), follows no redirect, clones shallow, and stops past the size cap."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import subprocess
from pathlib import Path

import pytest

from bot.errors import SandboxError
from bot.sandbox.base import SandboxSpec
from bot.sandbox.limits import Limits
from bot.sandbox.local.git import git_clone
from bot.sandbox.repo_net import FetchRules, RepoRefused
from tests.git_http import GitHttpServer, Redirector, make_repo
from tests.support import local_provider_at

HTTP = ("http",)  # the servers here speak plain HTTP; the bot's URLs must be https
LOOPBACK_1 = (ipaddress.ip_network("127.0.0.1/32"),)  # allowed; 127.0.0.2 is not
ANY_PORT = frozenset(range(1, 65536))  # the servers here listen on a free port
NAME = "git.rebind.test"  # in no DNS: git can reach it only at the address pinned for it


class Answers:
    """A resolver giving fixed addresses, keeping the names it was asked for."""

    def __init__(self, *addresses: str) -> None:
        self.addresses, self.calls = list(addresses), list[str]()

    async def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return self.addresses


def commits_in(checkout: Path) -> int:
    out = subprocess.run(
        ["git", "-C", str(checkout), "rev-list", "--count", "HEAD"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"},
    )  # fmt: skip
    return int(out.stdout)


async def test_a_name_is_looked_up_once_and_git_connects_to_that_address(tmp_path: Path) -> None:
    make_repo(tmp_path / "srv", {"data.csv": b"a,b\n1,2\n"}, commits=3)
    resolve = Answers("127.0.0.1")
    async with GitHttpServer(tmp_path / "srv") as server:
        dest = tmp_path / "checkout"
        rules = FetchRules(LOOPBACK_1, resolve=resolve, ports=ANY_PORT)
        await git_clone(f"http://{NAME}:{server.port}/repo.git", dest, HTTP, rules)
    assert (dest / "data.csv").read_bytes() == b"a,b\n1,2\n"
    assert resolve.calls == [NAME]
    assert {host for host, _ in server.requests} == {f"{NAME}:{server.port}"}
    assert commits_in(dest) == 1  # shallow: one commit of three


async def test_a_redirect_from_an_allowed_host_to_a_forbidden_address_is_not_followed(
    tmp_path: Path,
) -> None:
    make_repo(tmp_path / "srv", {"data.csv": b"secret,inside\n"})
    async with (
        GitHttpServer(tmp_path / "srv", host="127.0.0.2") as inside,
        Redirector(inside.base_url) as outside,
    ):
        rules = FetchRules(LOOPBACK_1, ports=ANY_PORT)
        with pytest.raises(RepoRefused, match="private or local"):  # inside is forbidden
            await git_clone(f"{inside.base_url}/repo.git", tmp_path / "direct", HTTP, rules)
        with pytest.raises(SandboxError, match="could not clone"):
            await git_clone(f"{outside.base_url}/repo.git", tmp_path / "via", HTTP, rules)
    assert outside.requests, "git asked the allowed host"
    assert inside.requests == []  # and never followed it to the forbidden one
    assert not (tmp_path / "via" / "data.csv").exists()


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.2"],  # loopback, not the allowed one
        ["127.0.0.1", "10.0.0.7"],  # one private answer spoils the lot
        ["::ffff:127.0.0.2"],  # IPv4-mapped loopback
        ["169.254.169.254"],  # cloud metadata
        ["fe80::1%eth0"],
        ["2002:7f00:2::"],  # 6to4 of 127.0.0.2
        ["2002:a9fe:a9fe::1"],  # 6to4 of cloud metadata
        ["2001:0:4136:e378:8000:63bf:f5ff:fffd"],  # Teredo, its client 10.0.0.2
        ["64:ff9b::7f00:2"],  # NAT64 of 127.0.0.2
        ["64:ff9b:1::a9fe:a9fe"],  # local NAT64 of cloud metadata
        [],
    ],
)
async def test_a_name_with_a_forbidden_address_is_refused_before_git_asks(
    tmp_path: Path, addresses: list[str]
) -> None:
    make_repo(tmp_path / "srv", {"data.csv": b"x\n"})
    async with GitHttpServer(tmp_path / "srv") as server:
        rules = FetchRules(LOOPBACK_1, resolve=Answers(*addresses), ports=ANY_PORT)
        with pytest.raises(RepoRefused):
            await git_clone(f"http://{NAME}:{server.port}/repo.git", tmp_path / "c", HTTP, rules)
    assert server.requests == []


async def test_a_lookup_that_fails_or_hangs_is_a_refusal(tmp_path: Path) -> None:
    async def fails(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    async def hangs(host: str, port: int) -> list[str]:
        await asyncio.Event().wait()
        return []

    url = f"http://{NAME}/repo.git"
    with pytest.raises(RepoRefused, match="could not be looked up"):
        await git_clone(url, tmp_path / "a", HTTP, FetchRules(resolve=fails))
    with pytest.raises(RepoRefused, match="took too long"):
        await git_clone(url, tmp_path / "b", HTTP, FetchRules(resolve=hangs, timeout_s=0.2))


async def test_a_clone_past_the_size_cap_is_stopped(tmp_path: Path) -> None:
    make_repo(tmp_path / "srv", {"big.bin": os.urandom(6 << 20)})
    async with GitHttpServer(tmp_path / "srv") as server:
        rules = FetchRules(LOOPBACK_1, max_bytes=1 << 20, ports=ANY_PORT)
        with pytest.raises(SandboxError, match="larger than the 1"):
            await git_clone(f"{server.base_url}/repo.git", tmp_path / "c", HTTP, rules)
        small = FetchRules(LOOPBACK_1, max_bytes=64 << 20, ports=ANY_PORT)
        await git_clone(f"{server.base_url}/repo.git", tmp_path / "ok", HTTP, small)
    assert (tmp_path / "ok" / "big.bin").stat().st_size == 6 << 20


async def test_the_checkout_counts_against_the_session_disk_quota(
    sandbox_root: Path, tmp_path: Path
) -> None:
    make_repo(tmp_path / "srv", {"big.bin": os.urandom(6 << 20)})
    async with GitHttpServer(tmp_path / "srv") as server:
        provider = local_provider_at(
            sandbox_root,
            Limits(disk_bytes=2 << 20),
            allowed_git_protocols=HTTP,
            fetch_rules=FetchRules(
                LOOPBACK_1, ports=ANY_PORT
            ),  # its own cap (1 GiB) is far above the quota
        )
        spec = SandboxSpec(session_key="s", repo_url=f"{server.base_url}/repo.git")
        try:
            with pytest.raises(SandboxError, match="larger than the 2"):
                await provider.create(spec)
        finally:
            await provider.close()
    assert [p.name for p in sandbox_root.iterdir() if p.name.startswith("lcl-")] == []


async def test_a_port_not_allowed_is_refused_before_anything_is_asked(tmp_path: Path) -> None:
    make_repo(tmp_path / "srv", {"data.csv": b"x\n"})
    resolve = Answers("127.0.0.1")
    async with GitHttpServer(tmp_path / "srv") as server:
        rules = FetchRules(LOOPBACK_1, resolve=resolve)  # 443 and 80 only
        with pytest.raises(RepoRefused, match=f"port {server.port} is not allowed"):
            await git_clone(f"http://{NAME}:{server.port}/repo.git", tmp_path / "c", HTTP, rules)
    assert server.requests == [] and resolve.calls == []


def fake_git(folder: Path, version: str) -> Path:
    """A `git` that says it is `version` and leaves a mark if asked to do anything else."""
    folder.mkdir()
    mark = folder / "cloned"
    script = folder / "git"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo "git version {version}"; exit 0; fi\n'
        f"touch {mark}\nexit 1\n"
    )
    script.chmod(0o755)
    return mark


@pytest.mark.parametrize("version", ["2.36.6", "1.9.1", "unknown"])
async def test_a_git_too_old_to_pin_the_address_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str
) -> None:
    mark = fake_git(tmp_path / "bin", version)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    rules = FetchRules(LOOPBACK_1, resolve=Answers("127.0.0.1"))
    with pytest.raises(SandboxError, match=r"needs git 2\.37 or later"):
        await git_clone(f"http://{NAME}/repo.git", tmp_path / "c", HTTP, rules)
    assert not mark.exists()
