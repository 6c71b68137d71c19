"""The optional repository checkout behind /buddy/data: a shallow clone with host git.

git runs with an environment built from scratch and no user or system config, only the
allowed URL protocols, and a time limit; credentials in its error messages are hidden.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bot.errors import SandboxError
from bot.sandbox.base import SANDBOX_PATH
from bot.sandbox.output import last_line

GIT_TIMEOUT_S = 300.0


async def git_clone(url: str, dest: Path, protocols: Sequence[str]) -> None:
    """Shallow-clone `url` into `dest` with host git, with no user or system config."""
    git = shutil.which("git")
    if git is None:
        raise SandboxError(
            "git is not installed on the bot's host, so the repository cannot be checked out"
        )
    home = await asyncio.to_thread(tempfile.mkdtemp, prefix="git-home-")
    allow = [arg for p in protocols for arg in ("-c", f"protocol.{p}.allow=always")]
    argv = [git, "-c", "protocol.allow=never", *allow, "clone", "--depth", "1"]
    argv += ["--single-branch", "--no-tags", "--quiet", "--", url, str(dest)]
    env = {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
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
            _, err = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT_S)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
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


def _redact(text: str) -> str:
    """Hide credentials embedded in URLs (https://user:token@host/...)."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", text)
