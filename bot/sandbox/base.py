"""The `Sandbox` seam: what every backend (local bubblewrap, Buddy REST) provides, and the
rules they share so that a snippet, a path or an exit code means the same on both.

Paths are always sandbox paths (`/buddy/work/...`, `/buddy/data/...`), never host paths,
so prompts and tests do not depend on the backend.
"""

from __future__ import annotations

import posixpath
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from bot.errors import SandboxGone, SandboxPathError

Language = Literal["python", "bash", "node"]
# Frees a sandbox's slot for the session named, if it can: True once one was let go.
MakeRoom = Callable[[str], Awaitable[bool]]
LANGUAGES: tuple[Language, ...] = ("python", "bash", "node")

WORK_DIR = "/buddy/work"
DATA_DIR = "/buddy/data"
UPLOADS_DIR = f"{WORK_DIR}/uploads"
OUT_DIR = f"{WORK_DIR}/out"
REPORT_PATH = f"{WORK_DIR}/report.md"
WORK_FOLDERS = (UPLOADS_DIR, OUT_DIR)  # made inside /buddy/work when a sandbox is created
RUN_DIR = "/buddy/.run"  # snippet files, outside the folders the file tools can list

# ok: exit code 0. error: non-zero exit. timeout: killed at the wall-clock limit.
# killed: stopped on request or by a resource limit signal.
ExecStatus = Literal["ok", "error", "timeout", "killed"]
# How a Python cell's kernel fared (None when the code did not run in a kernel).
# started: the sandbox's first kernel; kept: it ran where earlier cells ran; fresh: a new
# kernel replaced one whose state was lost; interrupted: KeyboardInterrupt at the time
# limit, state kept; restarted: it ignored the interrupt, so the kernel was killed;
# died: the kernel ended during the cell (kernel_note says how).
KernelEvent = Literal["started", "kept", "fresh", "interrupted", "restarted", "died"]


@dataclass(frozen=True)
class Output:
    """One captured stream: the head and tail kept, with how many bytes were cut between."""

    text: str
    cut_bytes: int = 0


@dataclass(frozen=True)
class ExecResult:
    status: ExecStatus
    exit_code: int | None
    stdout: Output
    stderr: Output
    duration_s: float
    kernel: KernelEvent | None = None
    kernel_note: str = ""
    note: str = ""  # why the sandbox stopped it, for the model (a disk quota, say)


@dataclass(frozen=True)
class CommandState:
    """A detached command as seen by a poll: running, or finished with its result."""

    command_id: str
    running: bool
    result: ExecResult  # output so far while running; exit_code is None then


@dataclass(frozen=True)
class FileEntry:
    name: str
    kind: Literal["file", "dir", "link", "other"]
    size: int


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as a provider lists it, for orphan clean-up."""

    id: str
    created_at: float | None  # Unix time, when the backend says


@dataclass(frozen=True)
class SandboxSpec:
    """What a session asks of a provider when it needs a sandbox."""

    session_key: str
    repo_url: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    snapshot_id: str | None = None  # the thread's own snapshot to restore (Snapshots)


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot as a provider lists it."""

    id: str
    name: str
    created_at: float | None  # Unix time, when the backend says


@runtime_checkable
class Snapshots(Protocol):
    """A provider that keeps a sandbox's disk as a snapshot, and makes a sandbox from one
    (`SandboxSpec.snapshot_id`): SESSION_IDLE_ACTION=snapshot."""

    async def take_snapshot(self, sandbox_id: str, name: str) -> str:
        """Snapshot the sandbox's disk; the snapshot's id once it can be restored."""
        ...

    async def delete_snapshot(self, snapshot_id: str) -> None:
        """Delete it; one already gone is fine."""
        ...

    async def list_snapshots(self, prefix: str) -> list[SnapshotInfo]:
        """The snapshots named with `prefix`, the oldest first."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    id: str

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run a snippet to completion or until `timeout_s`. Python runs in the sandbox's
        kernel (interrupted at the limit, killed if it does not stop); other languages run
        as a process whose whole tree is killed at the limit."""
        ...

    async def restart_kernel(self) -> None:
        """Drop the Python kernel; the next Python snippet starts a fresh one."""
        ...

    async def warm(self, imports: Sequence[str]) -> bool:
        """Start the Python kernel and make `imports` now, ahead of the first cell (a
        sandbox without a kernel does nothing). True if the kernel is up."""
        ...

    async def start_command(self, language: Language, code: str) -> str:
        """Start a snippet detached; returns a command id for `command_state` and `kill_command`."""
        ...

    async def command_state(self, command_id: str, wait_s: float = 0.0) -> CommandState:
        """The command's state; with `wait_s`, first wait up to that long for it to end (a
        cancelled wait leaves the command running)."""
        ...

    async def kill_command(self, command_id: str) -> None: ...

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        """Write a stream to `path` (parents created); returns the bytes written."""
        ...

    def download(self, path: str) -> AsyncIterator[bytes]:
        """Stream a file's bytes; raises SandboxPathError if it is missing."""
        ...

    async def list_dir(self, path: str) -> list[FileEntry]: ...

    async def stop(self) -> None:
        """End every process (the Python kernel, detached commands) but keep the files;
        `wake` starts the sandbox again."""
        ...

    async def wake(self) -> bool:
        """Make sure the sandbox runs, starting it again if it was stopped (by `stop`, or by
        its service after a time without activity). True if it was: files are kept, but its
        processes are gone (the kernel's variables, detached commands)."""
        ...

    async def destroy(self) -> None:
        """Remove the sandbox and everything in it. Idempotent."""
        ...


@runtime_checkable
class SandboxProvider(Protocol):
    async def create(self, spec: SandboxSpec) -> Sandbox: ...

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        """The existing sandbox `sandbox_id` (after a restart), or None if it is gone or
        unusable. A stopped one is returned as it is: `Sandbox.wake` starts it."""
        ...

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        """The sandboxes carrying `tag` (for orphan clean-up)."""
        ...

    async def destroy_id(self, sandbox_id: str) -> None: ...

    def waiting_for_slot(self, session_key: str) -> int:
        """While the session's new sandbox waits because the bot runs as many as it may at
        once: that number (MAX_SANDBOXES); else 0."""
        ...

    def has_room(self) -> bool:
        """Whether one more sandbox fits now, without waiting for a slot or making room
        (what the warm pool may take)."""
        ...

    def on_full(self, make_room: MakeRoom) -> None:
        """With a cap on live sandboxes: how to free one when it is reached, for the
        session named (True once a sandbox was stopped or deleted). Without: ignored."""
        ...

    async def close(self) -> None: ...


# -- rules every backend follows --


@dataclass(frozen=True)
class Interpreter:
    program: str  # looked up on SANDBOX_PATH unless a backend pins a path
    extension: str  # of the snippet file


INTERPRETERS: dict[str, Interpreter] = {
    "python": Interpreter("python3", "py"),
    "bash": Interpreter("bash", "sh"),
    "node": Interpreter("node", "js"),
}

SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Set for every snippet, besides PATH and HOME (/buddy/work).
SNIPPET_ENV: dict[str, str] = {
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "PYTHONUNBUFFERED": "1",
    "TMPDIR": "/tmp",
}

# A snippet that cannot start exits as a shell does for a missing program.
NOT_FOUND_EXIT = 127
# Signals sent by a resource limit (or a kill); a shell reports signal n as exit 128 + n.
LIMIT_SIGNALS = (signal.SIGKILL, signal.SIGXCPU, signal.SIGXFSZ)
KILL_EXIT = 128 + signal.SIGKILL
FILE_SIZE_EXIT = 128 + signal.SIGXFSZ


def unsupported_language(language: str) -> str | None:
    """Why `language` cannot run on any backend, or None if it is one of LANGUAGES."""
    if language in INTERPRETERS:
        return None
    return f"{language} is not a supported language (use {', '.join(LANGUAGES)})"


def not_installed(language: str) -> str:
    return f"{language} is not installed in this sandbox"


def exit_status(exit_code: int) -> ExecStatus:
    """The status of a run that ended on its own: a limit's signal counts as "killed"."""
    if exit_code == 0:
        return "ok"
    return "killed" if exit_code - 128 in LIMIT_SIGNALS else "error"


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


def upload_path(path: str) -> str:
    """A file path to write: under /buddy/work, and not /buddy/work itself."""
    target = sandbox_path(path, writable=True)
    if target == WORK_DIR:
        raise SandboxPathError(f"{path} is a folder; give a file path under it")
    return target


def path_missing(shown: str) -> SandboxPathError:
    return SandboxPathError(f"{shown} does not exist")


def wrong_kind(shown: str, kind: Literal["regular file", "folder"]) -> SandboxPathError:
    return SandboxPathError(f"{shown} is not a {kind}")


def destroyed(sandbox_id: str) -> SandboxGone:
    """A sandbox used after its destroy (by its session, or by the orphan sweeper)."""
    return SandboxGone(f"sandbox {sandbox_id} was destroyed")
