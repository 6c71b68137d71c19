"""Starting one bubblewrap (`bwrap`) container, and killing everything in it.

Isolation, per container:
* no network, own PID/IPC/UTS/user namespaces; the root file system is an empty,
  read-only tmpfs with /usr (read-only), a few files from /etc, private /proc, /dev, /tmp;
* when the bot runs as root the sandbox runs as an unprivileged host uid (65534 by
  default), because the kernel does not enforce RLIMIT_NPROC for uid 0;
* rlimits (CPU, memory, processes, file size, no core dumps) via `prlimit`;
* the environment is built from scratch: nothing of the bot's reaches the sandbox,
  not even bwrap's own environment (readable inside as /proc/1/environ).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import posixpath
import shutil
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.errors import SandboxUnavailable
from bot.sandbox.base import DATA_DIR, SANDBOX_PATH, SNIPPET_ENV, WORK_DIR
from bot.sandbox.limits import Limits

NOBODY_UID = 65534
INNER_UID = 1000  # the sandbox user's uid as seen inside (host root files show as nobody)

# Bound read-only from the host's /etc when present. Not the whole of /etc: it holds
# secrets (shadow, ssl/private, credentials in pip.conf, npmrc, gitconfig).
ETC_ENTRIES = (
    "alternatives",
    "ca-certificates",
    "fonts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "magic",
    "magic.mime",
    "matplotlibrc",
    "mime.types",
    "os-release",
    "papersize",
    "protocols",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
)
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")

# Generated /etc files: the sandbox must not see the host's users or hosts.
GENERATED_ETC: dict[str, bytes] = {
    "/etc/passwd": (
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"sandbox:x:{INNER_UID}:{INNER_UID}:sandbox:{WORK_DIR}:/bin/bash\n"
        f"nobody:x:{NOBODY_UID}:{NOBODY_UID}:nobody:/nonexistent:/usr/sbin/nologin\n"
    ).encode(),
    "/etc/group": f"root:x:0:\nsandbox:x:{INNER_UID}:\nnogroup:x:{NOBODY_UID}:\n".encode(),
    "/etc/hosts": b"127.0.0.1 localhost sandbox\n::1 localhost\n",
    "/etc/hostname": b"sandbox\n",
    "/etc/nsswitch.conf": b"passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
}


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
                os.killpg(int(pid), signal.SIGKILL)  # bwrap leads its own process group
                killed += 1
        except (OSError, ValueError):
            continue
    return killed


def require_util_linux(program: str) -> str:
    """prlimit and setpriv, which start every container."""
    found = shutil.which(program)
    if found is None:
        raise SandboxUnavailable(f"{program} is not installed; install util-linux")
    return found


def pick_uid(sandbox_uid: int | None) -> int | None:
    """The host uid to run sandboxes as, or None to keep the bot's own (non-root) uid."""
    if sandbox_uid == 0:
        raise SandboxUnavailable("the sandbox must not run as root (uid 0)")
    if os.geteuid() == 0:
        return NOBODY_UID if sandbox_uid is None else sandbox_uid
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


def resolve_interpreter(program: str) -> str | None:
    """The interpreter's path if the sandbox can run it (it sees the host's /usr)."""
    found = program if program.startswith("/") else shutil.which(program, path=SANDBOX_PATH)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return None
    visible = ["/usr/"] + [f"/{d}/" for d in SYSTEM_DIRS if not os.path.islink(f"/{d}")]
    return found if os.path.realpath(found).startswith(tuple(visible)) else None


class Launcher:
    """Starts containers: bwrap under `prlimit`, as the sandbox uid, with fixed options.

    Finding bwrap and prlimit and choosing the uid happen here, so a host that lacks
    them fails when the provider is made.
    """

    def __init__(self, limits: Limits, sandbox_uid: int | None) -> None:
        self.bwrap = require_bubblewrap()
        self.prlimit = require_util_linux("prlimit")
        self.setpriv = require_util_linux("setpriv")
        self.uid = pick_uid(sandbox_uid)
        self.limits = limits
        self._static_args = _static_bwrap_args(limits)

    async def spawn(
        self,
        work: Path,
        data: Path,
        command: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.PIPE,
    ) -> Container:
        """Start `command` in a new container with `work` and `data` mounted.

        `files` maps sandbox paths to contents placed there read-only; stderr is always a
        pipe.
        """
        info_read, info_write = os.pipe()
        fds = [info_write]
        try:
            file_args: list[str] = []
            for dest, content in {**GENERATED_ETC, **(files or {})}.items():
                fds.append(_memfd(content))
                file_args += ["--perms", "0444", "--ro-bind-data", str(fds[-1]), dest]
            folders = ["--bind", str(work), WORK_DIR]
            folders += ["--ro-bind", str(data), DATA_DIR]
            argv = [
                # bwrap's --die-with-parent guards only the processes inside; the outer bwrap
                # must die with the bot too, or a killed bot leaves its commands running.
                *[self.setpriv, "--pdeathsig", "KILL", "--"],
                self.prlimit,
                *self.limits.prlimit_args(),
                "--",
                self.bwrap,
                *self._static_args,
                *folders,
                *file_args,
                *["--info-fd", str(info_write), "--remount-ro", "/", "--"],
                *command,
            ]
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=stdin,
                stdout=stdout,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=fds,
                env={"PATH": SANDBOX_PATH},  # bwrap's own environment is visible inside
                start_new_session=True,  # its own process group, for `Container.kill`
                **self._credentials(),
            )
        except BaseException:
            os.close(info_read)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return Container(proc, info_read)

    def _credentials(self) -> dict[str, Any]:
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.uid, "extra_groups": []}


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


def _static_bwrap_args(limits: Limits) -> list[str]:
    """bwrap options shared by every container (the per-sandbox binds come after)."""
    args = [
        *["--unshare-all", "--unshare-user", "--disable-userns"],
        *["--uid", str(INNER_UID), "--gid", str(INNER_UID), "--hostname", "sandbox"],
        *["--die-with-parent", "--new-session"],
        *_system_dir_args(),
    ]
    for entry in _etc_entries():
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += [
        *["--proc", "/proc", "--dev", "/dev"],
        *["--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"],
        *["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp", "--symlink", "/tmp", "/var/tmp"],
        *["--chdir", WORK_DIR, "--clearenv"],
    ]
    for name, value in _sandbox_env().items():
        args += ["--setenv", name, value]
    return args


def _system_dir_args() -> list[str]:
    """/usr read-only, and /bin, /lib... as the host has them (symlinks on merged /usr)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_DIRS:
        host = f"/{name}"
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    return args


def _etc_entries() -> list[str]:
    python_dirs = [posixpath.basename(p) for p in glob.glob("/etc/python3*")]
    return [entry for entry in (*ETC_ENTRIES, *python_dirs) if os.path.exists(f"/etc/{entry}")]


def _sandbox_env() -> dict[str, str]:
    threads = str(min(os.cpu_count() or 1, 8))  # BLAS pools count against RLIMIT_NPROC
    return {
        "PATH": SANDBOX_PATH,
        "HOME": WORK_DIR,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "SHELL": "/bin/bash",
        **SNIPPET_ENV,
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "XDG_CACHE_HOME": f"{WORK_DIR}/.cache",
        "MPLCONFIGDIR": f"{WORK_DIR}/.cache/matplotlib",
        "OMP_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        # /buddy/data belongs to another uid; let `git log` there work anyway.
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }


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
