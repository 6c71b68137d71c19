"""The `Sandbox` seam: what every backend (local bubblewrap, Buddy REST) provides.

Paths are always sandbox paths (`/buddy/work/...`, `/buddy/data/...`), never host paths,
so prompts and tests do not depend on the backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

Language = Literal["python", "bash", "node"]
LANGUAGES: tuple[Language, ...] = ("python", "bash", "node")

WORK_DIR = "/buddy/work"
DATA_DIR = "/buddy/data"
UPLOADS_DIR = f"{WORK_DIR}/uploads"
OUT_DIR = f"{WORK_DIR}/out"
REPORT_PATH = f"{WORK_DIR}/report.md"

# ok: exit code 0. error: non-zero exit. timeout: killed at the wall-clock limit.
# killed: stopped on request or by a resource limit signal.
ExecStatus = Literal["ok", "error", "timeout", "killed"]


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


@runtime_checkable
class Sandbox(Protocol):
    id: str

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        """Run a snippet to completion or until `timeout_s`, killing its whole process tree."""
        ...

    async def start_command(self, language: Language, code: str) -> str:
        """Start a snippet detached; returns a command id for `command_state` and `kill_command`."""
        ...

    async def command_state(self, command_id: str) -> CommandState: ...

    async def kill_command(self, command_id: str) -> None: ...

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        """Write a stream to `path` (parents created); returns the bytes written."""
        ...

    def download(self, path: str) -> AsyncIterator[bytes]:
        """Stream a file's bytes; raises SandboxPathError if it is missing."""
        ...

    async def list_dir(self, path: str) -> list[FileEntry]: ...

    async def destroy(self) -> None:
        """Remove the sandbox and everything in it. Idempotent."""
        ...


@runtime_checkable
class SandboxProvider(Protocol):
    async def create(self, spec: SandboxSpec) -> Sandbox: ...

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        """The existing sandbox `sandbox_id` (after a restart), or None if it is gone or
        unusable."""
        ...

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        """The sandboxes carrying `tag` (for orphan clean-up)."""
        ...

    async def destroy_id(self, sandbox_id: str) -> None: ...

    async def close(self) -> None: ...
