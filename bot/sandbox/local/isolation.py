"""What a local container sees: the mounts, the generated /etc files and the environment.

Per container:
* no network, own PID/IPC/UTS/user namespaces; the root file system is an empty,
  read-only tmpfs with /usr (read-only), a few files from /etc, private /proc and /dev;
  /tmp and /dev/shm are the sandbox's own folders on disk (bound per sandbox, `bwrap`);
* the environment is built from scratch: nothing of the bot's reaches the sandbox,
  not even bwrap's own environment (readable inside as /proc/1/environ).
"""

from __future__ import annotations

import glob
import os
import posixpath
import shutil

from bot.sandbox.base import SANDBOX_PATH, SNIPPET_ENV, WORK_DIR
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


def resolve_interpreter(program: str) -> str | None:
    """The interpreter's path if the sandbox can run it (it sees the host's /usr)."""
    found = program if program.startswith("/") else shutil.which(program, path=SANDBOX_PATH)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return None
    visible = ["/usr/"] + [f"/{d}/" for d in SYSTEM_DIRS if not os.path.islink(f"/{d}")]
    return found if os.path.realpath(found).startswith(tuple(visible)) else None


def static_bwrap_args(
    limits: Limits, *, network: bool = False, user_namespaces: bool = False
) -> list[str]:
    """bwrap options shared by every container (the per-sandbox binds come after).

    `network` shares the host's network and `user_namespaces` lets code make namespaces of
    its own: never for the bot's sandboxes; the fake Buddy of the tests uses them to stand
    for a VM, which has both.
    """
    args = [
        "--unshare-all",
        *(["--share-net"] if network else []),
        *(["--unshare-user"] if user_namespaces else ["--unshare-user", "--disable-userns"]),
        *["--uid", str(INNER_UID), "--gid", str(INNER_UID), "--hostname", "sandbox"],
        *["--die-with-parent", "--new-session"],
        *_system_dir_args(),
    ]
    for entry in _etc_entries():
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += [
        *["--proc", "/proc", "--dev", "/dev"],
        *["--dir", "/dev/shm", "--remount-ro", "/dev", "--dir", "/tmp"],
        *["--symlink", "/tmp", "/var/tmp"],
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
