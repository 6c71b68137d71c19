"""What the fake Buddy keeps: sandboxes, their commands and snapshots, the recorded requests,
and the words and limits it answers with (see `api` for the server, `vm` for
what runs the commands)."""

from __future__ import annotations

import asyncio
import re
import secrets
import string
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.fakes.buddy.vm import DATA_DIR, INTERPRETERS, WORK_DIR, Process, Vm

OS_VALUES = ("ubuntu:22.04", "ubuntu:24.04")
RESOURCES = (*(f"{n}x{2 * n}" for n in range(1, 13)), "CUSTOM")
RUNTIMES = (*INTERPRETERS, "TYPESCRIPT")  # TYPESCRIPT: no interpreter in the fake
SANDBOX_ID_RE = re.compile(r"[a-z0-9]{13}")
VIRTUAL_DIRS: dict[str, list[str]] = {"/": ["/buddy"], "/buddy": [DATA_DIR, WORK_DIR]}

NOT_RUNNING = "Instance is not running"
PATH_NOT_FOUND = "Path not find in browser"
INVALID_URL = "Invalid url"
IN_PROGRESS = "Cannot update sandbox, operation in progress"
POLL_S = 0.05  # how often command output and state are polled
# A terminated command reports 137, SIGKILL's (undocumented upstream). Kills wait until
# the newest process is this old: a command terminated over HTTP is never younger on the
# real service, and a container killed in its first milliseconds proves nothing.
KILL_SETTLE_S = 0.25
SETUP_TIMEOUT_S = 600.0
FILE_OP_TIMEOUT_S = 60.0


class ApiError(Exception):
    """Answered as `{"errors": [{"message": ...}]}` with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class RecordedRequest:
    method: str
    path: str  # decoded, without the query
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    json: Any | None = None  # the parsed JSON body; None for multipart or empty bodies
    at: float = field(default_factory=time.time)  # when it arrived
    status: int = 0  # what it was answered with (0: no answer, the connection dropped)


@dataclass(eq=False)
class FakeCommand:
    """A tracked command (§5.9); `status` flips `status_lag_s` after the process ends."""

    id: str
    command: str
    runtime: str
    process: Process
    start_date: str
    status: str = "INPROGRESS"
    exit_code: int | None = None
    finish_date: str | None = None
    flip_at: float = 0.0  # monotonic time before which the status stays INPROGRESS
    started: float = field(default_factory=time.monotonic)

    def hold_status(self, lag_s: float) -> None:
        """Keep reporting INPROGRESS for `lag_s` more seconds (if not finished yet)."""
        if self.status == "INPROGRESS":
            self.flip_at = max(self.flip_at, time.monotonic() + lag_s)

    def finish(self, exit_code: int) -> None:
        if self.status != "INPROGRESS":
            return  # finished already (by a stop)
        self.exit_code = exit_code
        self.status = "SUCCESSFUL" if self.exit_code == 0 else "FAILED"
        self.finish_date = now_iso()


@dataclass(eq=False)
class FakeSandbox:
    id: str
    name: str
    os: str
    create_date: str
    identifier: str | None = None
    resources: str = "2x4"
    tags: list[str] = field(default_factory=list)
    timeout: int | None = None
    fetch: list[dict[str, Any]] = field(default_factory=list)
    first_boot_commands: str | None = None
    app_dir: str | None = None
    apps: list[dict[str, Any]] = field(default_factory=list)
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    variables: list[dict[str, Any]] = field(default_factory=list)
    permissions: dict[str, Any] | None = None
    note: str | None = None
    agent_note: str | None = None
    snapshot_id: str | None = None
    status: str = "STARTING"
    setup_status: str = "INPROGRESS"
    boot_logs: list[str] = field(default_factory=list)
    commands: dict[str, FakeCommand] = field(default_factory=dict)
    vm: Vm | None = None
    gone: bool = False  # deleted, vanished, or torn down with the server
    last_spawn: float = 0.0  # monotonic time the newest command or script was started
    active_at: float = field(default_factory=time.monotonic)  # inactivity counts from here
    busy: str | None = None  # an operation in progress that blocks updates ("snapshot")
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # boot over (either way)
    boot_task: asyncio.Task[None] | None = None
    watchers: set[asyncio.Task[None]] = field(default_factory=set)

    history: list[tuple[float, str, str]] = field(default_factory=list)  # (time, status, why)

    def touch(self) -> None:
        """Activity (a command started): the inactivity countdown starts again."""
        self.active_at = time.monotonic()

    def set_status(self, status: str, why: str = "") -> None:
        self.status = status
        self.history.append((time.time(), status, why))


@dataclass(eq=False)
class FakeSnapshot:
    """A sandbox's disk as it was: /buddy/work as a tar.gz, /buddy/data as a host folder."""

    id: str
    name: str | None
    sandbox_id: str
    os: str
    create_date: str
    status: str = "CREATING"
    work: bytes = b""
    data: str | None = None  # host folder holding the copy of /buddy/data
    size: int = 0


def lines_of(text: str) -> list[str]:
    return text.splitlines()


async def settle(since: float) -> None:
    """Wait until `KILL_SETTLE_S` has passed since `since` (a monotonic time)."""
    delay = since + KILL_SETTLE_S - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


def compact(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if v is not None}


def random_id(length: int) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
