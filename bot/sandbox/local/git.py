"""The optional repository checkout behind /buddy/data: a shallow clone with host git.

git runs with an environment built from scratch and no user or system config, only the
allowed URL protocols, and a time limit; credentials in its error messages are hidden. An
http(s) host is resolved and checked once and git pinned to that address, redirects off
(`repo_net`); the clone is shallow, without submodules or LFS content, and killed once its
folder passes the size cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from asyncio.subprocess import Process
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from bot.errors import SandboxError
from bot.sandbox.base import SANDBOX_PATH
from bot.sandbox.local.quota import used_bytes
from bot.sandbox.output import last_line
from bot.sandbox.repo_net import NO_RULES, FetchRules, git_pin_args, resolve_checked
from bot.units import size_text

GIT_TIMEOUT_S = 300.0
SIZE_POLL_S = 0.1
# http.curloptResolve, which binds the host to the checked address, came in git 2.37; an
# older git ignores it without a word and looks the name up again itself.
PINNING_GIT = (2, 37)
GIT_VERSION = re.compile(rb"git version (\d+)\.(\d+)")


async def git_clone(
    url: str, dest: Path, protocols: Sequence[str], rules: FetchRules = NO_RULES
) -> None:
    """Shallow-clone `url` into `dest` with host git, with no user or system config."""
    git = shutil.which("git")
    if git is None:
        raise SandboxError(
            "git is not installed on the bot's host, so the repository cannot be checked out"
        )
    pin = []
    if urlsplit(url).scheme in ("http", "https"):
        await _check_pinning(git)
        pin = git_pin_args(await resolve_checked(url, rules))
    home = await asyncio.to_thread(tempfile.mkdtemp, prefix="git-home-")
    allow = [arg for p in protocols for arg in ("-c", f"protocol.{p}.allow=always")]
    argv = [git, "-c", "protocol.allow=never", *allow, *pin, "clone", "--depth", "1"]
    argv += ["--single-branch", "--no-tags", "--no-recurse-submodules", "--quiet"]
    argv += ["--", url, str(dest)]
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_LFS_SKIP_SMUDGE": "1",  # pointers only, should git-lfs be set up after all
        "LANG": "C",
    }
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # so a timeout can kill git's helpers too
            umask=0o022,  # the sandbox user reads the checkout as "other"
        )
        try:
            err = await asyncio.wait_for(_stderr_within(proc, dest, rules), GIT_TIMEOUT_S)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            # Reaped here, so its transport is closed while the loop still runs.
            await asyncio.shield(proc.wait())
            raise
    except TimeoutError:
        raise SandboxError(
            f"cloning the repository took longer than {GIT_TIMEOUT_S:.0f} s"
        ) from None
    finally:
        await asyncio.to_thread(shutil.rmtree, home, True)
    if proc.returncode != 0:
        detail = _redact(last_line(err)) or f"git exit code {proc.returncode}"
        raise SandboxError(f"could not clone the repository: {detail}")


async def _check_pinning(git: str) -> None:
    """Refuse to fetch over http(s) with a git too old to be pinned to the checked address."""
    proc = await asyncio.create_subprocess_exec(
        git, "--version", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env={"PATH": SANDBOX_PATH, "LANG": "C"},
    )  # fmt: skip
    out, _ = await proc.communicate()
    found = GIT_VERSION.search(out)
    version = (int(found[1]), int(found[2])) if found else None
    if version is None or version < PINNING_GIT:
        have = f"git {version[0]}.{version[1]}" if version else "a git of unknown version"
        raise SandboxError(
            f"the bot's host has {have}; fetching a repository safely needs git "
            f"{PINNING_GIT[0]}.{PINNING_GIT[1]} or later (to connect only to the checked address)"
        )


async def _stderr_within(proc: Process, dest: Path, rules: FetchRules) -> bytes:
    """git's stderr once it exits; raises once `dest` holds more than the rules allow."""
    cap = asyncio.create_task(_cap_size(dest, rules.max_bytes))
    talk = asyncio.ensure_future(proc.communicate())
    try:
        await asyncio.wait([cap, talk], return_when=asyncio.FIRST_COMPLETED)
        if not talk.done():
            cap.result()  # the cap's error
        if await asyncio.to_thread(used_bytes, [dest]) > rules.max_bytes:
            raise _too_large(rules.max_bytes)  # it grew past the cap between two looks
        return talk.result()[1]
    finally:
        cap.cancel()
        talk.cancel()


async def _cap_size(dest: Path, max_bytes: int) -> None:
    while await asyncio.to_thread(used_bytes, [dest]) <= max_bytes:  # noqa: ASYNC110 - a folder
        await asyncio.sleep(SIZE_POLL_S)
    raise _too_large(max_bytes)


def _too_large(max_bytes: int) -> SandboxError:
    return SandboxError(f"the repository is larger than the {size_text(max_bytes)} allowed")


def _redact(text: str) -> str:
    """Hide credentials embedded in URLs (https://user:token@host/...)."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", text)
