"""Starting one bubblewrap (`bwrap`) container, and killing everything in it.

Each container runs bwrap under `prlimit` (CPU, memory, processes, file size, no core
dumps) and, when the bot runs as root, as an unprivileged host uid of the sandbox's own
(`uids`): the kernel does not enforce RLIMIT_NPROC for uid 0, and counts it per uid.
What the container sees is set up by `isolation`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.errors import SandboxUnavailable
from bot.sandbox.base import DATA_DIR, SANDBOX_PATH, WORK_DIR
from bot.sandbox.limits import Limits
from bot.sandbox.local.cgroups import join_command
from bot.sandbox.local.cpu import CpuWatch
from bot.sandbox.local.folders import SCRATCH
from bot.sandbox.local.isolation import GENERATED_ETC, static_bwrap_args
from bot.sandbox.local.uids import uid_range
from bot.settings.sandbox import DEFAULT_UID_BASE


def require_bubblewrap(path: str | None = None) -> str:
    """Return the bwrap executable, or raise: code never runs without isolation.

    `path` is a PATH-style search list (default: the PATH environment variable).
    """
    found = shutil.which("bwrap", path=path)
    if found is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed; install it with `apt-get install bubblewrap` "
            "(or your distribution's bubblewrap package). The local sandbox never runs code "
            "without it."
        )
    return found


def kill_containers_of(home: Path) -> int:
    """SIGKILL the containers still running over a sandbox folder, left by a bot that died.

    Each container dies with the bot that started it, except in one window: a bot killed
    while it was starting a container, before the parent-death signal was armed.
    """
    mount = f"{home / 'work'}\0{WORK_DIR}\0".encode()
    killed = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mount in Path(f"/proc/{pid}/cmdline").read_bytes():
                _kill_with_group(int(pid))
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


def _kill_with_group(pid: int) -> None:
    """SIGKILL a bwrap process and its process group. The outer bwrap leads its group, but
    the inner one (the namespace's init) is a member only: when the outer one died during
    start-up, the inner one is left with parent 1, and signalling its pid as a group would
    miss it."""
    with contextlib.suppress(ProcessLookupError):
        group = os.getpgid(pid)
        os.kill(pid, signal.SIGKILL)
        if group != os.getpgrp():  # never the bot's own group
            os.killpg(group, signal.SIGKILL)


def require_util_linux(program: str) -> str:
    """prlimit and setpriv, which start every container."""
    found = shutil.which(program)
    if found is None:
        raise SandboxUnavailable(f"{program} is not installed; install util-linux")
    return found


def pick_uid(sandbox_uid: int | None, uid_base: int = DEFAULT_UID_BASE) -> int | range | None:
    """The host uid to run sandboxes as: one for all, a range from `uid_base` to give each
    its own (root without a uid asked for), or None to keep the bot's own (non-root) uid."""
    if sandbox_uid == 0:
        raise SandboxUnavailable("the sandbox must not run as root (uid 0)")
    if os.geteuid() == 0:
        return uid_range(uid_base) if sandbox_uid is None else sandbox_uid
    if sandbox_uid not in (None, os.getuid()):
        raise SandboxUnavailable(f"running the sandbox as uid {sandbox_uid} needs root")
    return None


def check_reachable(root: Path, uid: int) -> None:
    """bwrap runs as `uid`, so it must be able to walk down to the sandbox folders."""
    blocked = [
        str(folder) for folder in (*reversed(root.parents), root) if not _searchable(folder, uid)
    ]
    if blocked:
        raise SandboxUnavailable(
            f"the sandbox user (uid {uid}) cannot reach {root}: not searchable: "
            f"{', '.join(blocked)}; use another sandbox root or `chmod o+x` those folders"
        )


def _searchable(folder: Path, uid: int) -> bool:
    st = folder.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == uid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


class Launcher:
    """Starts containers: bwrap under `prlimit`, as the sandbox uid, with fixed options.

    Finding bwrap and prlimit and choosing the uid happen here, so a host that lacks
    them fails when the provider is made.
    """

    def __init__(
        self,
        limits: Limits,
        sandbox_uid: int | None,
        *,
        uid_base: int = DEFAULT_UID_BASE,
        network: bool = False,
        user_namespaces: bool = False,
    ) -> None:
        self.bwrap = require_bubblewrap()
        self.prlimit = require_util_linux("prlimit")
        self.setpriv = require_util_linux("setpriv")
        self.uids = pick_uid(sandbox_uid, uid_base)
        self.limits = limits
        self.cpu_watch = CpuWatch()  # every container's CPU time, from outside
        self._static_args = static_bwrap_args(
            limits, network=network, user_namespaces=user_namespaces
        )

    async def spawn(
        self,
        home: Path,
        scratch: Path,
        command: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.PIPE,
        cpu_limit: bool = True,
        uid: int | None = None,
        cgroups: Sequence[Path] = (),
    ) -> Container:
        """Start `command` in a new container over the sandbox folder `home` (its work and
        data mounted, /tmp and /dev/shm from `scratch`), as host `uid` (None: the bot's own).

        `files` maps sandbox paths to contents placed there read-only; stderr is always a
        pipe. Without `cpu_limit` the command must limit its CPU time itself (the kernel).
        `cgroups`: the sandbox's memory and cpu cgroups, joined before anything else runs.
        """
        info_read, info_write = os.pipe()
        fds = [info_write]
        try:
            binds = [
                "--bind",
                str(home / "work"),
                WORK_DIR,
                "--ro-bind",
                str(home / "data"),
                DATA_DIR,
            ]
            for name, dest in SCRATCH.items():
                binds += ["--bind", str(scratch / name), dest]
            for dest, content in {**GENERATED_ETC, **(files or {})}.items():
                fds.append(_memfd(content))
                binds += ["--perms", "0444", "--ro-bind-data", str(fds[-1]), dest]
            proc = await asyncio.create_subprocess_exec(
                *join_command(cgroups),
                *self._argv(binds, info_write, command, cpu_limit),
                stdin=stdin,
                stdout=stdout,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=fds,
                env={"PATH": SANDBOX_PATH},  # bwrap's own environment is visible inside
                start_new_session=True,  # its own process group, for `Container.kill`
                **_credentials(uid),
            )
        except BaseException:
            os.close(info_read)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return Container(proc, info_read)

    def _argv(
        self, binds: list[str], info_fd: int, command: Sequence[str], cpu_limit: bool
    ) -> list[str]:
        return [
            # bwrap's --die-with-parent guards only the processes inside; the outer bwrap
            # must die with the bot too, or a killed bot leaves its commands running.
            *[self.setpriv, "--pdeathsig", "KILL", "--"],
            self.prlimit,
            *self.limits.prlimit_args(cpu=cpu_limit),
            "--",
            self.bwrap,
            *self._static_args,
            *binds,
            *["--info-fd", str(info_fd), "--remount-ro", "/", "--"],
            *command,
        ]


class Container:
    """A running bwrap process; killing it kills everything in its PID namespace."""

    def __init__(self, proc: asyncio.subprocess.Process, info_fd: int) -> None:
        self.proc = proc
        self._info_fd: int | None = info_fd  # bwrap reports the namespace's init pid here
        self._init_pid: int | None = None

    def kill(self) -> None:
        """SIGKILL the namespace's init: the kernel then kills every process inside it.

        bwrap (the init's parent) then reaps it and exits, so nothing is left orphaned.
        """
        if self.proc.returncode is not None:
            return
        pid = self._namespace_init()
        if pid is not None and self._kill_child(pid):
            return
        # No namespace init known yet: bwrap's child may still be setting up, before
        # --die-with-parent holds, so kill bwrap's whole process group (the child's too).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def _kill_child(self, pid: int) -> bool:
        """SIGKILL `pid` only if it is still bwrap's child (the pid may have been reused)."""
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            return False
        try:
            if _parent_pid(pid) != self.proc.pid:
                return False
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            return True
        except OSError:
            return False
        finally:
            os.close(pidfd)

    def close(self) -> None:
        if self._info_fd is not None:
            os.close(self._info_fd)
            self._info_fd = None

    def _namespace_init(self) -> int | None:
        if self._init_pid is None and self._info_fd is not None:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                os.set_blocking(self._info_fd, False)
                info = json.loads(os.read(self._info_fd, 65536))
                self._init_pid = int(info["child-pid"])
        return self._init_pid


# -- helpers --


def _credentials(uid: int | None) -> dict[str, Any]:
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


def _memfd(content: bytes) -> int:
    """An anonymous in-memory file holding `content`, positioned at its start."""
    fd = os.memfd_create("sandbox-file", os.MFD_CLOEXEC)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _parent_pid(pid: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    return None
