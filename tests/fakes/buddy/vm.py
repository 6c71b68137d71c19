"""The fake Buddy's own stand-in for a sandbox VM: a disk folder on the host and one
bubblewrap container per process, written here and sharing nothing with the bot's local
backend, so a bug there cannot hide the same bug on the Buddy side.

What a command sees, as on a Buddy VM (buddy-sandbox-api.md §1, §5.15):
* `/buddy` (with `/buddy/work` and `/buddy/data`), `/home/buddy` and `/tmp` are folders of
  the sandbox's disk, writable, kept across commands; `/tmp` is emptied by a stop;
* `/run` read-only but for `/run/user/1000`, the user's runtime folder, where services
  of the user's (a D-Bus session bus, systemd's user manager) keep their sockets;
* the machine's `/usr` and `/etc` read-only (the shadow files hidden), the user `buddy`
  (uid 1000) running `bash`; the machine's network; user namespaces of its own allowed
  (the bot's `unshare --net` relies on that);
* a PID namespace per command: when a command's main process ends, what it left running
  ends too, and a terminate kills all of it. A real VM keeps such processes (§6.4: a long
  build started by one command may go on, and be stopped with the sandbox), and what a
  terminate signals there is not documented: the fake differs from Buddy here.
There is no working `sudo` (the document promises passwordless sudo): a client that needs
root for its own folders fails here first.

How Buddy's bash starts a command is not documented. By default the fake runs it as a
plain script (no startup file read); `VmShell` makes it a login shell (it reads
~/.bash_profile, ~/.bash_login or ~/.profile first, as `bash -l` or an SSH login would) or
gives it another PATH, for tests of what a command inherits from earlier ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

WORK_DIR = "/buddy/work"
DATA_DIR = "/buddy/data"
UID = 1000
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CAPTURE_BYTES = 16 << 20  # per stream; past it output is drained and dropped
HIDDEN_ETC = ("shadow", "gshadow", "shadow-", "gshadow-")
PASSWD = f"root:x:0:0:root:/root:/bin/bash\nbuddy:x:{UID}:{UID}:buddy:/home/buddy:/bin/bash\n"
GROUP = f"root:x:0:\nbuddy:x:{UID}:\n"
INTERPRETERS = {"BASH": "bash", "PYTHON": "python3", "JAVASCRIPT": "node"}


class VmError(Exception):
    """The VM could not do what was asked."""


class VmGone(VmError):
    """The VM has been destroyed (its sandbox deleted)."""


@dataclass(eq=False)
class Process:
    """One process in the VM: its container, and its output as it comes."""

    proc: asyncio.subprocess.Process
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    readers: list[asyncio.Task[None]] = field(default_factory=list)
    reaper: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    exit_code: int | None = None  # once done; 128 + signal when killed

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def kill(self) -> None:
        """SIGKILL the container's process group: bwrap, and its init while that is still
        setting up; once the init runs it dies with bwrap (--die-with-parent), and with it
        everything in the PID namespace."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass(frozen=True)
class VmShell:
    """How the VM's bash starts every command: as a login shell or not, and its PATH."""

    login: bool = False
    path: str = PATH


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


class Vm:
    """A sandbox's disk under `home` and the processes running on it."""

    def __init__(self, home: Path, hostname: str, shell: VmShell | None = None) -> None:
        self.home = home
        self.hostname = hostname
        self.shell = shell or VmShell()
        self.processes: set[Process] = set()
        self.closed = False
        for folder in (
            self.work,
            self.data,
            self.runtime,
            home / "disk/home/buddy",
            home / "disk/tmp",
        ):
            folder.mkdir(parents=True, exist_ok=True)
        (home / "etc").mkdir(exist_ok=True)
        (home / "etc/passwd").write_text(PASSWD)
        (home / "etc/group").write_text(GROUP)
        (home / "scripts").mkdir(exist_ok=True)
        (home / "run/buddy").mkdir(exist_ok=True)  # the scripts' mount point in /run

    @property
    def work(self) -> Path:
        return self.home / "disk" / WORK_DIR.lstrip("/")

    @property
    def runtime(self) -> Path:
        """The host folder that is the user's /run/user/1000 (a test may serve a socket)."""
        return self.home / f"run/user/{UID}"

    @property
    def data(self) -> Path:
        return self.home / "disk" / DATA_DIR.lstrip("/")

    # -- processes

    async def start(self, runtime: str, source: str, *, stdin: bool = False) -> Process:
        """Start `source` with the runtime's interpreter, as `buddy`, in its home folder;
        the source travels as a read-only file (an argument could be too long)."""
        if self.closed:
            raise VmGone("the sandbox is gone")
        program = INTERPRETERS[runtime]
        script = self.home / "scripts" / f"{os.urandom(6).hex()}"
        script.write_text(source)
        argv = ["setpriv", "--pdeathsig", "KILL", "--", "bwrap", *self._bwrap_args()]
        login = ["--login"] if self.shell.login and runtime == "BASH" else []
        argv += ["--", program, *login, f"/run/buddy/{script.name}"]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": PATH},
            start_new_session=True,  # its own process group, for `Process.kill`
        )
        process = Process(proc)
        assert proc.stdout is not None and proc.stderr is not None
        process.readers = [
            asyncio.create_task(_drain(proc.stdout, process.stdout)),
            asyncio.create_task(_drain(proc.stderr, process.stderr)),
        ]
        self.processes.add(process)
        process.reaper = asyncio.create_task(self._reap(process, script))
        return process

    async def run(self, script: str, timeout_s: float = 60.0) -> Result:
        """Run a BASH script to its end (killed past `timeout_s`)."""
        process = await self.start("BASH", script)
        try:
            async with asyncio.timeout(timeout_s):
                await process.done.wait()
        except TimeoutError:
            process.kill()
            await process.done.wait()
        return result_of(process)

    async def stop_all(self) -> None:
        """End every process (a stop or a restart); /tmp starts empty next time."""
        running = list(self.processes)
        for process in running:
            process.kill()
        await asyncio.gather(*(p.done.wait() for p in running))
        tmp = self.home / "disk/tmp"
        await asyncio.to_thread(shutil.rmtree, tmp, True)
        tmp.mkdir(exist_ok=True)

    async def destroy(self) -> None:
        self.closed = True
        await self.stop_all()
        await asyncio.to_thread(shutil.rmtree, self.home, True)

    # -- files, through processes in the VM

    async def write(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        """Write a file from `chunks` with `cat` in the VM; its size."""
        process = await self.start("BASH", f"exec cat > {shlex.quote(path)}", stdin=True)
        stdin = process.proc.stdin
        assert stdin is not None
        size = 0
        try:
            with contextlib.suppress(ConnectionError):  # cat ended early: its exit code says
                async for chunk in chunks:
                    stdin.write(chunk)
                    size += len(chunk)
                    await stdin.drain()
                stdin.close()
        except BaseException:
            process.kill()  # the body broke off: no cat left waiting for the rest
            raise
        await process.done.wait()
        if process.exit_code != 0:
            raise VmError(process.stderr.decode(errors="replace").strip() or f"cannot write {path}")
        return size

    async def read(self, path: str) -> AsyncIterator[bytes]:
        """A file's bytes, streamed from `cat` in the VM."""
        process = await self._spawn_reader(path)
        stdout = process.proc.stdout
        assert stdout is not None
        try:
            while chunk := await stdout.read(64 * 1024):
                yield chunk
            await process.done.wait()
            if process.exit_code != 0:
                raise VmError(process.stderr.decode(errors="replace").strip())
        finally:
            process.kill()  # the reader left early: stop cat
            # Read its pipe to the end and wait for it, or its transport outlives the loop.
            while await stdout.read(64 * 1024):
                pass
            await process.done.wait()

    async def _spawn_reader(self, path: str) -> Process:
        """A `cat` whose stdout the caller reads itself (not captured)."""
        process = await self.start("BASH", f"exec cat -- {shlex.quote(path)}")
        process.readers[0].cancel()  # the caller reads stdout
        return process

    async def _reap(self, process: Process, script: Path) -> None:
        try:
            code = await process.proc.wait()
            await asyncio.gather(*process.readers, return_exceptions=True)
            process.exit_code = 128 - code if code < 0 else code
        finally:
            script.unlink(missing_ok=True)
            self.processes.discard(process)
            process.done.set()

    def _bwrap_args(self) -> list[str]:
        disk, etc = self.home / "disk", self.home / "etc"
        args = [
            *("--unshare-user", "--uid", str(UID), "--gid", str(UID)),
            *("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", self.hostname),
            *("--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"),
            *("--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"),
            *("--ro-bind", str(etc / "passwd"), "/etc/passwd"),
            *("--ro-bind", str(etc / "group"), "/etc/group"),
            *("--bind", str(disk / "buddy"), "/buddy", "--bind", str(disk / "home"), "/home"),
            *("--bind", str(disk / "tmp"), "/tmp", "--ro-bind", str(self.home / "run"), "/run"),
            *("--bind", str(self.runtime), f"/run/user/{UID}"),
            *("--ro-bind", str(self.home / "scripts")),
            "/run/buddy",
            *("--chdir", "/home/buddy", "--clearenv"),
            *("--setenv", "PATH", self.shell.path, "--setenv", "HOME", "/home/buddy"),
            *("--setenv", "USER", "buddy", "--setenv", "LANG", "C.UTF-8"),
            *("--setenv", "BUDDY_SANDBOX", self.hostname),
        ]
        for name in HIDDEN_ETC:
            if Path("/etc", name).exists():
                args += ["--ro-bind", "/dev/null", f"/etc/{name}"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = Path("/", name)
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        return [*args, "--remount-ro", "/"]


def result_of(process: Process) -> Result:
    code = process.exit_code if process.exit_code is not None else 137
    return Result(
        code, process.stdout.decode(errors="replace"), process.stderr.decode(errors="replace")
    )


async def _drain(stream: asyncio.StreamReader, into: bytearray) -> None:
    while chunk := await stream.read(64 * 1024):
        if len(into) < CAPTURE_BYTES:
            into += chunk[: CAPTURE_BYTES - len(into)]
