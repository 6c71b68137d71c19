"""Local sandbox backend: every call runs in a fresh bubblewrap (`bwrap`) container.

Per sandbox there is a host folder `<root>/<id>/` holding `work/` (mounted read-write at
/buddy/work), `data/` (read-only at /buddy/data, the optional git checkout) and
`sandbox.json` (tags, for orphan clean-up). Files persist between calls; processes do not,
except detached commands.

Isolation, per call:
* no network, own PID/IPC/UTS/user namespaces; the root file system is an empty,
  read-only tmpfs with /usr (read-only), a few files from /etc, private /proc, /dev, /tmp;
* when the bot runs as root the sandbox runs as an unprivileged host uid (65534 by
  default), because the kernel does not enforce RLIMIT_NPROC for uid 0;
* rlimits (CPU, memory, processes, file size, no core dumps) via `prlimit`;
* the environment is built from scratch: nothing of the bot's reaches the sandbox,
  not even bwrap's own environment (readable inside as /proc/1/environ).

File operations (upload, download, list) also run inside a sandbox, so symlinks that user
code planted in the work folder resolve inside the sandbox and never reach host files.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import posixpath
import re
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from bot.errors import SandboxError, SandboxPathError, SandboxUnavailable
from bot.sandbox.base import (
    DATA_DIR,
    LANGUAGES,
    OUT_DIR,
    UPLOADS_DIR,
    WORK_DIR,
    CommandState,
    ExecResult,
    ExecStatus,
    FileEntry,
    Language,
    SandboxSpec,
)
from bot.sandbox.limits import Limits
from bot.sandbox.output import READ_CHUNK, CappedBuffer, pump

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
NOBODY_UID = 65534
INNER_UID = 1000  # the sandbox user's uid as seen inside (host root files show as nobody)
RUN_DIR = "/buddy/.run"  # where the snippet file appears, read-only
META_FILE = "sandbox.json"
ID_PREFIX = "lcl-"
ID_RE = re.compile(r"lcl-[0-9a-f]{12}")

GIT_TIMEOUT_S = 300.0
FILE_OP_TIMEOUT_S = 60.0  # listing, and the longest wait for the next chunk of a download
PIPE_GRACE_S = 5.0  # after exit, how long to wait for the output pipes to reach EOF
LIST_MAX_BYTES = 8 << 20
TOOL_STDERR_BYTES = 4096
MESSAGE_MAX_CHARS = 200

# Language -> (interpreter, snippet file name). Not the bot's python: Debian's, under /usr.
INTERPRETERS: dict[str, tuple[str, str]] = {
    "python": ("/usr/bin/python3", "main.py"),
    "bash": ("/bin/bash", "main.sh"),
    "node": ("node", "main.js"),
}

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

# Shell helpers for file operations; the path is always "$1", never part of the script.
UPLOAD_SH = 'mkdir -p -- "${1%/*}" && exec cat > "$1"'
DOWNLOAD_SH = '[ -e "$1" ] || exit 3; [ -f "$1" ] || exit 4; exec cat -- "$1"'
LIST_SH = (
    '[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 4; '
    'exec find "$1/" -mindepth 1 -maxdepth 1 -printf "%y %s %f\\0"'
)
EXIT_MISSING, EXIT_WRONG_KIND = 3, 4
FIND_KINDS: dict[bytes, Literal["file", "dir", "link"]] = {b"f": "file", b"d": "dir", b"l": "link"}
LIMIT_SIGNALS = (signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ)


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


def sandbox_path(path: str, *, writable: bool = False) -> str:
    """Normalise a sandbox path; it must lie under /buddy/work (or /buddy/data to read)."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise SandboxPathError(f"{path!r} is not an absolute sandbox path")
    norm = posixpath.normpath(path)
    roots = (WORK_DIR,) if writable else (WORK_DIR, DATA_DIR)
    if any(norm == root or norm.startswith(root + "/") for root in roots):
        return norm
    allowed = " or ".join(roots)
    raise SandboxPathError(f"{path} is outside {allowed}")


class LocalProvider:
    """Creates bubblewrap sandboxes whose folders live under `root`."""

    def __init__(
        self,
        root: Path,
        limits: Limits = Limits(),  # noqa: B008 - frozen dataclass, safe as a default
        *,
        sandbox_uid: int | None = None,
        allowed_git_protocols: tuple[str, ...] = ("https",),
        interpreters: Mapping[str, str] | None = None,
    ) -> None:
        self._bwrap = require_bubblewrap()
        self._prlimit = _require_prlimit()
        self._uid = _pick_uid(sandbox_uid)
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        if self._uid is not None:
            _check_reachable(self.root, self._uid)
        self.limits = limits
        self._git_protocols = allowed_git_protocols
        self._interpreters = {lang: prog for lang, (prog, _) in INTERPRETERS.items()}
        self._interpreters.update(interpreters or {})
        self._static_args = _static_bwrap_args(limits)
        self._sandboxes: dict[str, LocalSandbox] = {}
        self._probed = False
        self._closed = False

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if self._closed:
            raise SandboxUnavailable("the local sandbox provider is closed")
        sandbox_id = ID_PREFIX + secrets.token_hex(6)
        home = self.root / sandbox_id
        sandbox = LocalSandbox(self, sandbox_id, home)
        self._sandboxes[sandbox_id] = sandbox
        try:
            await asyncio.to_thread(self._make_folders, home, spec)
            await self._probe(home)
            if spec.repo_url:
                await _git_clone(spec.repo_url, home / "data", self._git_protocols)
        except BaseException:
            await sandbox.destroy()
            raise
        return sandbox

    async def list_ids(self, tag: str) -> list[str]:
        return await asyncio.to_thread(_ids_with_tag, self.root, tag)

    async def destroy_id(self, sandbox_id: str) -> None:
        if not ID_RE.fullmatch(sandbox_id):
            raise SandboxError(f"{sandbox_id!r} is not a local sandbox id")
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None:
            await sandbox.destroy()
        else:  # left over from an earlier run: its processes died with that bot
            await asyncio.to_thread(_remove_tree, self.root / sandbox_id)

    async def close(self) -> None:
        """Stop every process of this provider's sandboxes; their folders stay."""
        self._closed = True
        await asyncio.gather(*(sb.stop_all() for sb in list(self._sandboxes.values())))

    # -- internals shared with LocalSandbox --

    def _forget(self, sandbox_id: str) -> None:
        self._sandboxes.pop(sandbox_id, None)

    def _make_folders(self, home: Path, spec: SandboxSpec) -> None:
        home.mkdir(mode=0o700)
        meta = {"id": home.name, "session_key": spec.session_key, "tags": list(spec.tags)}
        (home / META_FILE).write_text(json.dumps(meta))
        data, work = home / "data", home / "work"
        data.mkdir()
        work.mkdir()
        subdirs = [work / posixpath.relpath(d, WORK_DIR) for d in (UPLOADS_DIR, OUT_DIR)]
        for sub in subdirs:
            sub.mkdir()
        # Explicit modes: the bot's umask must not decide what the sandbox user can reach.
        home.chmod(0o711)
        data.chmod(0o755)
        work.chmod(0o700)
        if self._uid is not None:
            for path in (work, *subdirs):
                os.chown(path, self._uid, self._uid)

    async def _probe(self, home: Path) -> None:
        """Start one trivial sandbox so a host that cannot run bwrap fails at create time."""
        if self._probed:
            return
        container = await self._spawn(home, ["/bin/true"], stdout=asyncio.subprocess.DEVNULL)
        try:
            _, err = await container.proc.communicate()
        finally:
            container.close()
        if container.proc.returncode != 0:
            raise SandboxUnavailable(
                f"bubblewrap cannot start a sandbox on this host: {_last_line(err)} "
                "(bubblewrap 0.8 or newer and unprivileged user namespaces are needed)"
            )
        self._probed = True

    def _program(self, language: str, code: str) -> tuple[list[str], dict[str, bytes]]:
        """The command to run a snippet, and the files to place in the sandbox for it."""
        if language not in LANGUAGES:
            names = ", ".join(LANGUAGES)
            return _fail_command(f"{language} is not a supported language (use {names})"), {}
        interpreter = _resolve_interpreter(self._interpreters[language])
        if interpreter is None:
            return _fail_command(f"{language} is not installed in this sandbox"), {}
        snippet = f"{RUN_DIR}/{INTERPRETERS[language][1]}"
        return [interpreter, snippet], {snippet: code.encode("utf-8", errors="replace")}

    async def _spawn(
        self,
        home: Path,
        command: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.PIPE,
    ) -> _Container:
        """Start `command` in a new bwrap container over `home`; stderr is always a pipe."""
        info_read, info_write = os.pipe()
        fds = [info_write]
        try:
            file_args: list[str] = []
            for dest, content in {**GENERATED_ETC, **(files or {})}.items():
                fds.append(_memfd(content))
                file_args += ["--perms", "0444", "--ro-bind-data", str(fds[-1]), dest]
            folders = ["--bind", str(home / "work"), WORK_DIR]
            folders += ["--ro-bind", str(home / "data"), DATA_DIR]
            argv = [
                self._prlimit,
                *self.limits.prlimit_args(),
                "--",
                self._bwrap,
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
                **self._credentials(),
            )
        except BaseException:
            os.close(info_read)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return _Container(proc, info_read)

    def _credentials(self) -> dict[str, Any]:
        if self._uid is None:
            return {}
        return {"user": self._uid, "group": self._uid, "extra_groups": []}


class _Container:
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
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()  # no namespace yet (or gone): --die-with-parent covers the rest

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


class _Run:
    """A snippet's container with its stdout and stderr pumped into capped buffers."""

    def __init__(self, container: _Container, output_bytes: int, max_s: float | None) -> None:
        self.container = container
        self.proc = container.proc
        self.stdout = CappedBuffer(output_bytes)
        self.stderr = CappedBuffer(output_bytes)
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stop_reason: ExecStatus | None = None
        self.done = asyncio.create_task(self._finish(max_s))

    async def _finish(self, max_s: float | None) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        pumps = asyncio.gather(
            pump(self.proc.stdout, self.stdout), pump(self.proc.stderr, self.stderr)
        )
        try:
            try:
                await asyncio.wait_for(self.proc.wait(), max_s)
            except TimeoutError:
                self.kill("timeout")
                await self.proc.wait()
            # Every process that could hold the pipes died with the PID namespace.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pumps, PIPE_GRACE_S)
        finally:
            pumps.cancel()
            self.container.close()
            self.ended = time.monotonic()

    def kill(self, reason: ExecStatus) -> None:
        if self.proc.returncode is None:
            self.stop_reason = self.stop_reason or reason
            self.container.kill()

    def result(self) -> ExecResult:
        now = self.ended or time.monotonic()
        rc = self.proc.returncode if self.ended is not None else None
        status: ExecStatus = "ok"
        exit_code = rc
        if rc is not None and rc != 0:
            if self.stop_reason is not None:
                status, exit_code = self.stop_reason, None
            else:
                status = "killed" if rc < 0 or rc - 128 in LIMIT_SIGNALS else "error"
        return ExecResult(
            status, exit_code, self.stdout.output(), self.stderr.output(), now - self.started
        )

    def startup_error(self) -> str | None:
        """bwrap's own message if the container could not be set up."""
        text = self.stderr.output().text
        if self.proc.returncode == 1 and text.startswith("bwrap: "):
            return text.splitlines()[0]
        return None


class LocalSandbox:
    """One sandbox: a host folder plus the processes currently running over it."""

    def __init__(self, provider: LocalProvider, sandbox_id: str, home: Path) -> None:
        self.id = sandbox_id
        self._provider = provider
        self._home = home
        self._runs: set[_Run] = set()
        self._tools: set[_Container] = set()
        self._commands: dict[str, _Run] = {}
        self._destroyed = False

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        run = await self._start(language, code, timeout_s)
        try:
            await asyncio.shield(run.done)
        except asyncio.CancelledError:
            run.kill("killed")
            raise
        if (message := run.startup_error()) is not None:
            raise SandboxError(f"the sandbox could not start: {message}")
        return run.result()

    async def start_command(self, language: Language, code: str) -> str:
        run = await self._start(language, code, self._provider.limits.command_max_s)
        command_id = "cmd-" + secrets.token_hex(4)
        self._commands[command_id] = run
        return command_id

    async def command_state(self, command_id: str) -> CommandState:
        run = self._command(command_id)
        return CommandState(command_id, running=not run.done.done(), result=run.result())

    async def kill_command(self, command_id: str) -> None:
        run = self._command(command_id)
        run.kill("killed")
        await asyncio.shield(run.done)

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        target = sandbox_path(path, writable=True)
        if target == WORK_DIR:
            raise SandboxPathError(f"{path} is a folder; give a file path under it")
        written = 0
        async with self._tool(UPLOAD_SH, target, stdin=asyncio.subprocess.PIPE) as (proc, errors):
            assert proc.stdin is not None
            try:
                async for chunk in chunks:
                    proc.stdin.write(chunk)
                    written += len(chunk)
                    await proc.stdin.drain()  # back-pressure: never more than a pipe's worth held
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the writer died; its exit status says why
            rc = await proc.wait()
        if rc != 0:
            raise _file_error("write", path, rc, errors)
        return written

    def download(self, path: str) -> AsyncIterator[bytes]:
        target = sandbox_path(path)
        self._check_alive()
        return self._read_file(path, target)

    async def list_dir(self, path: str) -> list[FileEntry]:
        target = sandbox_path(path)
        async with self._tool(LIST_SH, target, stdout=asyncio.subprocess.PIPE) as (proc, errors):
            assert proc.stdout is not None
            try:
                raw = await asyncio.wait_for(
                    _read_at_most(proc.stdout, LIST_MAX_BYTES), FILE_OP_TIMEOUT_S
                )
            except TimeoutError:
                raise SandboxError(f"listing {path} took too long") from None
            if raw is None:
                raise SandboxError(f"{path} has too many entries to list")
            rc = await proc.wait()
        if rc != 0:
            raise _file_error("list", path, rc, errors, kind="folder")
        return _parse_listing(raw)

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        await self.stop_all()
        await asyncio.to_thread(_remove_tree, self._home)
        self._provider._forget(self.id)

    async def stop_all(self) -> None:
        """Kill every process running over this sandbox and wait until they are gone."""
        for run in list(self._runs):
            run.kill("killed")
        for container in list(self._tools):
            container.kill()
        pending = [run.done for run in self._runs]
        if pending:
            await asyncio.wait(pending)

    # -- internals --

    def _check_alive(self) -> None:
        if self._destroyed:
            raise SandboxUnavailable(f"sandbox {self.id} was destroyed")

    def _command(self, command_id: str) -> _Run:
        self._check_alive()
        run = self._commands.get(command_id)
        if run is None:
            raise SandboxError(f"no such command {command_id!r} in sandbox {self.id}")
        return run

    async def _start(self, language: str, code: str, max_s: float | None) -> _Run:
        self._check_alive()
        command, files = self._provider._program(language, code)
        container = await self._provider._spawn(self._home, command, files=files)
        run = _Run(container, self._provider.limits.output_bytes, max_s)
        self._runs.add(run)
        run.done.add_done_callback(lambda _: self._runs.discard(run))
        return run

    @contextlib.asynccontextmanager
    async def _tool(
        self,
        script: str,
        target: str,
        *,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.DEVNULL,
    ) -> AsyncIterator[tuple[asyncio.subprocess.Process, CappedBuffer]]:
        """A file-operation helper process in its own sandbox, killed if left early."""
        self._check_alive()
        command = ["/bin/sh", "-c", script, "sh", target]
        container = await self._provider._spawn(self._home, command, stdin=stdin, stdout=stdout)
        self._tools.add(container)
        errors = CappedBuffer(TOOL_STDERR_BYTES)
        assert container.proc.stderr is not None
        err_pump = asyncio.create_task(pump(container.proc.stderr, errors))
        try:
            yield container.proc, errors
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(err_pump), PIPE_GRACE_S)
        finally:
            self._tools.discard(container)
            container.kill()
            container.close()
            err_pump.cancel()

    async def _read_file(self, path: str, target: str) -> AsyncIterator[bytes]:
        async with self._tool(DOWNLOAD_SH, target, stdout=asyncio.subprocess.PIPE) as (
            proc,
            errors,
        ):
            assert proc.stdout is not None
            while True:
                try:
                    chunk = await asyncio.wait_for(proc.stdout.read(READ_CHUNK), FILE_OP_TIMEOUT_S)
                except TimeoutError:
                    raise SandboxError(f"reading {path} stalled") from None
                if not chunk:
                    break
                yield chunk
            rc = await proc.wait()
        if rc != 0:
            raise _file_error("read", path, rc, errors)


# -- helpers --


def _require_prlimit() -> str:
    found = shutil.which("prlimit")
    if found is None:
        raise SandboxUnavailable("prlimit is not installed; install util-linux")
    return found


def _pick_uid(sandbox_uid: int | None) -> int | None:
    """The host uid to run sandboxes as, or None to keep the bot's own (non-root) uid."""
    if sandbox_uid == 0:
        raise SandboxUnavailable("the sandbox must not run as root (uid 0)")
    if os.geteuid() == 0:
        return NOBODY_UID if sandbox_uid is None else sandbox_uid
    if sandbox_uid not in (None, os.getuid()):
        raise SandboxUnavailable(f"running the sandbox as uid {sandbox_uid} needs root")
    return None


def _check_reachable(root: Path, uid: int) -> None:
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
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "MPLBACKEND": "Agg",
        "PYTHONUNBUFFERED": "1",
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


def _resolve_interpreter(program: str) -> str | None:
    """The interpreter's path if the sandbox can run it (it sees the host's /usr)."""
    found = program if program.startswith("/") else shutil.which(program, path=SANDBOX_PATH)
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return None
    visible = ["/usr/"] + [f"/{d}/" for d in SYSTEM_DIRS if not os.path.islink(f"/{d}")]
    return found if os.path.realpath(found).startswith(tuple(visible)) else None


def _parent_pid(pid: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    return None


def _fail_command(message: str) -> list[str]:
    """A command that reports `message` like a shell would for a missing program."""
    return ["/bin/sh", "-c", 'printf "%s\\n" "$1" >&2; exit 127', "sh", message]


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


async def _read_at_most(stream: asyncio.StreamReader, limit: int) -> bytes | None:
    """All of `stream`, or None once it exceeds `limit` bytes."""
    data = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        data += chunk
        if len(data) > limit:
            return None
    return bytes(data)


def _parse_listing(raw: bytes) -> list[FileEntry]:
    entries = []
    for record in raw.split(b"\0"):
        if record:
            kind, size, name = record.split(b" ", 2)
            name_text = name.decode("utf-8", "replace")
            entries.append(FileEntry(name_text, FIND_KINDS.get(kind, "other"), int(size)))
    return sorted(entries, key=lambda entry: entry.name)


def _file_error(
    action: str, path: str, rc: int, errors: CappedBuffer, *, kind: str = "regular file"
) -> SandboxError:
    if rc == EXIT_MISSING:
        return SandboxPathError(f"{path} does not exist")
    if rc == EXIT_WRONG_KIND:
        return SandboxPathError(f"{path} is not a {kind}")
    if rc == 128 + signal.SIGXFSZ:
        return SandboxError(f"could not {action} {path}: it exceeds the sandbox's file size limit")
    detail = _last_line(errors.output().text) or f"exit code {rc}"
    return SandboxError(f"could not {action} {path}: {detail}")


def _last_line(raw: str | bytes) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    lines = text.strip().splitlines()
    return lines[-1].strip()[:MESSAGE_MAX_CHARS] if lines else ""


def _ids_with_tag(root: Path, tag: str) -> list[str]:
    ids = []
    for entry in sorted(root.iterdir()):
        if not ID_RE.fullmatch(entry.name):
            continue
        try:
            meta = json.loads((entry / META_FILE).read_text())
        except (OSError, ValueError):
            continue
        if tag in meta.get("tags", []):
            ids.append(entry.name)
    return ids


def _remove_tree(path: Path) -> None:
    """rmtree that also copes with folders the sandbox made read-only; no-op if gone."""
    if not path.exists():
        return
    try:
        shutil.rmtree(path)
    except OSError:  # not root: a read-only folder blocks deleting its entries
        _make_folders_writable(path)
        shutil.rmtree(path)


def _make_folders_writable(top: Path) -> None:
    """chmod 700 every folder under `top`, each before reading it (symlinks not followed)."""
    stack = [top]
    while stack:
        folder = stack.pop()
        with contextlib.suppress(OSError):
            folder.chmod(0o700)
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            stack += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]


async def _git_clone(url: str, dest: Path, protocols: Sequence[str]) -> None:
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
        detail = _redact(_last_line(err)) or f"git exit code {proc.returncode}"
        raise SandboxError(f"could not clone the repository: {detail}")


def _redact(text: str) -> str:
    """Hide credentials embedded in URLs (https://user:token@host/...)."""
    return re.sub(r"(://)[^/@\s]+@", r"\1***@", text)
