"""A fake Buddy.Works Sandbox REST API server for tests.

A real aiohttp server on 127.0.0.1 with the paths, JSON shapes and status codes of the
Buddy Sandbox API notes (buddy-sandbox-api.md, §3-§7). Every fake sandbox is backed by a
real local bubblewrap sandbox (`bot.sandbox.local`), so commands really run, isolated, and
files really land::

    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as buddy:
        buddy.fail_next(2, method="GET", path=r"/commands/", status=503)
        async with httpx.AsyncClient(base_url=buddy.base_url, headers=auth) as http:
            await http.post("/workspaces/acme/sandboxes?project_name=analytics", json=...)

Where the document is unsure the fake picks the behaviour that is harder on a client:
missing paths give 400 "Path not find in browser", a malformed sandbox id gives 400
"Invalid url", `setup_status` turns SUCCESS a moment before `status` turns RUNNING, and a
finished command still reads INPROGRESS for `status_lag_s` after its log stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import posixpath
import re
import secrets
import shlex
import string
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import BodyPartReader, web

from bot.errors import SandboxError, SandboxPathError, SandboxUnavailable
from bot.sandbox.base import (
    DATA_DIR,
    WORK_DIR,
    ExecResult,
    FileEntry,
    Language,
    Output,
    SandboxSpec,
)
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalProvider, LocalSandbox
from bot.sandbox.output import last_line
from tests.fakes.loopback import serve

__all__ = ["FakeBuddy", "FakeCommand", "FakeSandbox", "RecordedRequest"]

OS_VALUES = ("ubuntu:22.04", "ubuntu:24.04")
RESOURCES = (*(f"{n}x{2 * n}" for n in range(1, 13)), "CUSTOM")
FETCH_TYPES = ("PROJECT_REPO", "PUBLIC_REPO", "ARTIFACT")
RUNTIMES: dict[str, Language | None] = {
    "BASH": "bash",
    "PYTHON": "python",
    "JAVASCRIPT": "node",
    "TYPESCRIPT": None,  # not available in the local backend
}
SANDBOX_ID_RE = re.compile(r"[a-z0-9]{13}")
# Letters, digits, _ and -; starts with a letter (older docs), never ends with a hyphen.
IDENTIFIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?<!-)")
VIRTUAL_DIRS: dict[str, list[str]] = {"/": ["/buddy"], "/buddy": [DATA_DIR, WORK_DIR]}

NOT_RUNNING = "Instance is not running"
PATH_NOT_FOUND = "Path not find in browser"
INVALID_URL = "Invalid url"
JSONL = "application/jsonl"
POLL_S = 0.05  # how often command output and state are polled
KILLED_EXIT_CODE = 137  # what a terminated command reports (undocumented upstream)
# The local backend can strand a bwrap container killed in its first milliseconds (its kill
# then never returns), so kills wait until the newest container is this old. A command
# terminated over HTTP is never that young on the real service.
KILL_SETTLE_S = 0.25
SETUP_TIMEOUT_S = 600.0
FILE_OP_TIMEOUT_S = 60.0
DEFAULT_FAULT_MESSAGES = {
    429: "Too many requests",
    500: "Internal server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
}

STAT_SH = """p={path}
if [ -d "$p" ]; then echo DIR
elif [ -e "$p" ]; then echo "FILE $(stat -L -c %s -- "$p")"
else echo MISSING; fi"""
MKDIR_SH = """p={path}
if [ -e "$p" ] || [ -L "$p" ]; then exit 17; fi
[ -d "$(dirname -- "$p")" ] || exit 3
exec mkdir -- "$p"
"""
EXIT_EXISTS, EXIT_NO_PARENT = 17, 3


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


@dataclass
class _Fault:
    remaining: int
    method: str | None
    path: str | None
    status: int
    retry_after: float | None
    message: str | None
    drop: bool
    delay_s: float
    after: bool

    def matches(self, request: RecordedRequest) -> bool:
        if self.method is not None and self.method.upper() != request.method:
            return False
        return self.path is None or re.search(self.path, request.path) is not None


@dataclass(eq=False)
class FakeCommand:
    """A tracked command (§5.9); `status` flips `status_lag_s` after the process ends."""

    id: str
    command: str
    runtime: str
    local_id: str
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

    def finish(self, result: ExecResult) -> None:
        self.exit_code = _exit_code(result)
        self.status = "SUCCESSFUL" if self.exit_code == 0 else "FAILED"
        self.finish_date = _now()


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
    local: LocalSandbox | None = None
    gone: bool = False  # deleted, vanished, or torn down with the server
    last_spawn: float = 0.0  # monotonic time the newest command or script was started
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # boot over (either way)
    boot_task: asyncio.Task[None] | None = None
    watchers: set[asyncio.Task[None]] = field(default_factory=set)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_obj_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _is_timeout(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# Fields a create or PATCH body may set directly, with their checks.
FIELD_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (_is_str, "a string"),
    "identifier": (_is_str, "a string"),
    "os": (_is_str, "a string"),
    "resources": (_is_str, "a string"),
    "first_boot_commands": (_is_str, "a string"),
    "app_dir": (_is_str, "a string"),
    "note": (_is_str, "a string"),
    "agent_note": (_is_str, "a string"),
    "snapshot_id": (_is_str, "a string"),
    "timeout": (_is_timeout, "a positive integer (seconds)"),
    "tags": (_is_str_list, "an array of strings"),
    "fetch": (_is_obj_list, "an array of objects"),
    "endpoints": (_is_obj_list, "an array of objects"),
    "variables": (_is_obj_list, "an array of objects"),
    "permissions": (lambda v: isinstance(v, dict), "an object"),
}
PATCHABLE = (
    "name",
    "identifier",
    "resources",
    "first_boot_commands",
    "app_dir",
    "fetch",
    "timeout",
    "tags",
    "endpoints",
    "variables",
    "permissions",
    "note",
    "agent_note",
)
CREATE_FIELDS = (*PATCHABLE, "os", "snapshot_id", "apps")


class FakeBuddy:
    """The fake API server; an async context manager."""

    def __init__(
        self,
        sandbox_root: Path,
        *,
        workspace: str = "acme",
        project: str = "analytics",
        token: str = "buddy-test-token",
        boot_delay_s: float = 0.3,
        repos: Mapping[str, Path] | None = None,
        exec_timeout_s: float = 60.0,
        limits: Limits | None = None,
        port: int = 0,
    ) -> None:
        self.sandbox_root = Path(sandbox_root)
        self.port = port  # 0: any free port
        self.workspace = workspace
        self.project = project
        self.token = token
        self.boot_delay_s = boot_delay_s
        self.repos: dict[str, Path] = dict(repos or {})
        self.exec_timeout_s = exec_timeout_s  # the sync exec ceiling (60 s upstream)
        self.running_lag_s = 0.05  # setup SUCCESS/FAILED comes this long before RUNNING
        self.status_lag_s = 0.1  # a finished command reads INPROGRESS this much longer
        self.limits = limits or Limits()
        self.api_enabled = True
        self.base_url = ""
        self.requests: list[RecordedRequest] = []
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.deleted: set[str] = set()
        self._faults: list[_Fault] = []
        self._teardowns: set[asyncio.Task[None]] = set()
        self._provider: LocalProvider | None = None
        self._runner: web.AppRunner | None = None

    # -- lifecycle

    async def __aenter__(self) -> FakeBuddy:
        # A Buddy command is a process of its own, whatever its runtime: no kernels here.
        self._provider = LocalProvider(
            self.sandbox_root, self.limits, allowed_git_protocols=("file",), python_kernel=False
        )
        app = web.Application(middlewares=[self._middleware])
        self._add_routes(app.router)
        self._runner, self.base_url = await serve(app, self.port)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.gather(
            *(self._teardown(sb) for sb in self.sandboxes.values()), *self._teardowns
        )
        if self._provider is not None:
            await self._provider.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- test helpers

    def fail_next(
        self,
        n: int,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int = 503,
        retry_after: float | None = None,
        message: str | None = None,
        drop: bool = False,
        delay_s: float = 0.0,
        after: bool = False,
    ) -> None:
        """Answer the next `n` matching requests with `status` (or drop their connection).

        `path` is a regex searched in the decoded request path. Faults are checked before
        authentication, like a gateway in front of the API. `delay_s` holds the faulty
        answer back that long (a client with a shorter read timeout gives up). With `after`
        the request is handled first and only its answer is lost: it took effect, and the
        client cannot tell (for answers that are not streamed).
        """
        fault = _Fault(n, method, path, status, retry_after, message, drop, delay_s, after)
        self._faults.append(fault)

    def vanish(self, sandbox_id: str) -> None:
        """Delete a sandbox behind the client's back; its processes are killed shortly."""
        sb = self.sandboxes[sandbox_id]
        self._forget(sb)
        task = asyncio.create_task(self._teardown(sb))
        self._teardowns.add(task)
        task.add_done_callback(self._teardowns.discard)

    def requests_to(self, method: str, pattern: str) -> list[RecordedRequest]:
        """The recorded requests with this method whose path matches the regex `pattern`."""
        return [
            r for r in self.requests if r.method == method.upper() and re.search(pattern, r.path)
        ]

    # -- routing and the checks every request goes through

    def _add_routes(self, router: web.UrlDispatcher) -> None:
        ws = "/workspaces/{ws}"
        one = f"{ws}/sandboxes/{{sid}}"
        command = f"{one}/commands/{{cid}}"
        router.add_get(f"{ws}/identifiers", self._identifiers)
        router.add_get(f"{ws}/sandboxes", self._list_sandboxes)
        router.add_post(f"{ws}/sandboxes", self._create_sandbox)
        router.add_get(one, self._get_sandbox)
        router.add_patch(one, self._update_sandbox)
        router.add_delete(one, self._delete_sandbox)
        router.add_get(f"{one}/commands", self._list_commands)
        router.add_post(f"{one}/commands", self._run_command)
        router.add_post(f"{one}/exec", self._exec_command)
        router.add_get(command, self._get_command)
        router.add_get(f"{command}/logs", self._command_logs)
        router.add_post(f"{command}/terminate", self._terminate_command)
        router.add_post(f"{one}/content/upload/{{path:.*}}", self._upload)  # before content/
        router.add_get(f"{one}/content/{{path:.*}}", self._list_content)
        router.add_post(f"{one}/content/{{path:.*}}", self._make_dir)
        router.add_get(f"{one}/download/{{path:.*}}", self._download)

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        record = RecordedRequest(
            request.method,
            request.path,
            dict(request.query.items()),
            {k.lower(): v for k, v in request.headers.items()},
        )
        self.requests.append(record)
        fault = self._take_fault(record)
        if fault is None or fault.after:
            response = await self._handle(request, handler, record)
            if fault is None:
                return response
        return await _fault_response(request, fault)

    async def _handle(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Any],
        record: RecordedRequest,
    ) -> web.StreamResponse:
        """The real answer, with the API's errors as Buddy words them."""
        try:
            record.json = await _peek_json(request)
            self._check_access(request)
            return await handler(request)
        except ApiError as err:
            return _error(err.status, err.message)
        except web.HTTPException as err:
            if err.status == 404:
                return _error(404, f"Not found: {request.method} {request.path}")
            return _error(err.status, err.reason)
        except SandboxPathError as err:
            return _error(400, str(err))
        except SandboxUnavailable:
            return _error(404, "Sandbox not found")
        except SandboxError as err:
            return _error(500, str(err))

    def _take_fault(self, record: RecordedRequest) -> _Fault | None:
        for fault in self._faults:
            if fault.remaining > 0 and fault.matches(record):
                fault.remaining -= 1
                return fault
        return None

    def _check_access(self, request: web.Request) -> None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or token != self.token:
            raise ApiError(401, "Invalid or expired token")
        if request.match_info.get("ws", self.workspace) != self.workspace:
            raise ApiError(404, "Workspace not found")
        if not self.api_enabled:
            raise ApiError(403, "API is disabled in this workspace")

    def _check_project(self, request: web.Request) -> None:
        name = request.query.get("project_name")
        if not name:
            raise ApiError(400, "project_name is required")
        if name != self.project:
            raise ApiError(404, f"Project {name!r} not found")

    def _sandbox(self, request: web.Request) -> FakeSandbox:
        sid = request.match_info["sid"]
        if not SANDBOX_ID_RE.fullmatch(sid):
            raise ApiError(400, INVALID_URL)
        sb = self.sandboxes.get(sid)
        if sb is None:
            raise ApiError(404, "Sandbox not found")
        return sb

    def _running(self, request: web.Request) -> tuple[FakeSandbox, LocalSandbox]:
        sb = self._sandbox(request)
        if sb.status != "RUNNING" or sb.local is None:
            raise ApiError(400, NOT_RUNNING)
        return sb, sb.local

    # -- sandboxes

    async def _identifiers(self, request: web.Request) -> web.Response:
        view: dict[str, Any] = {
            "url": f"{self._ws_url()}/identifiers",
            "html_url": f"https://app.buddy.works/{self.workspace}",
            "domain": self.workspace,
        }
        if request.query.get("project") == self.project:  # else: no scope, nothing found
            view["project_identifier"] = self.project
            wanted = request.query.get("sandbox")
            match = [sb for sb in self.sandboxes.values() if wanted in (sb.identifier, sb.id)]
            if wanted and match:
                view["sandbox_id"] = match[0].id
        return web.json_response(view)

    async def _list_sandboxes(self, request: web.Request) -> web.Response:
        self._check_project(request)
        items = [self._id_view(sb) for sb in self.sandboxes.values()]
        view = {"url": f"{self._ws_url()}/sandboxes", "html_url": self._project_html()}
        return web.json_response({**view, "sandboxes": items})

    async def _create_sandbox(self, request: web.Request) -> web.Response:
        self._check_project(request)
        body = await _json_object(request)
        self._validate_create(body)
        fields = {key: body[key] for key in CREATE_FIELDS if body.get(key) is not None}
        fields["apps"] = [_app(command) for command in fields.get("apps", [])]
        fields.setdefault("os", OS_VALUES[-1])  # a snapshot brings its own os
        sb = FakeSandbox(id=_random_id(13), create_date=_now(), **fields)
        sb.boot_logs.append("Sandbox starting...")
        self.sandboxes[sb.id] = sb
        sb.boot_task = asyncio.create_task(self._boot(sb))
        return web.json_response(self._view(sb), status=201)

    async def _get_sandbox(self, request: web.Request) -> web.Response:
        return web.json_response(self._view(self._sandbox(request)))

    async def _update_sandbox(self, request: web.Request) -> web.Response:
        sb = self._sandbox(request)
        body = await _json_object(request)
        if sb.status != "RUNNING" or sb.setup_status == "INPROGRESS":
            raise ApiError(400, "Cannot update sandbox, operation in progress")
        _check_fields(body)
        if "name" in body and not body["name"]:
            raise ApiError(400, "'name' is required")
        self._check_identifier(body.get("identifier"), sb)
        _check_enums(body)
        if body.get("fetch"):
            _check_fetch(body["fetch"])
        if "first_boot_commands" in body and body["first_boot_commands"] != sb.first_boot_commands:
            sb.setup_status = "STALE"  # applied only by a recreate
        for key in PATCHABLE:
            if key in body:  # null clears the field
                empty: Any = [] if isinstance(getattr(sb, key), list) else None
                setattr(sb, key, empty if body[key] is None else body[key])
        return web.json_response(self._view(sb))

    async def _delete_sandbox(self, request: web.Request) -> web.Response:
        sb = self._sandbox(request)
        self._forget(sb)
        await self._teardown(sb)
        return web.Response(status=204)

    def _validate_create(self, body: dict[str, Any]) -> None:
        if body.get("source_sandbox_id") is not None:
            raise ApiError(400, "cloning a sandbox is not supported by the fake")
        required = ("snapshot_id", "name") if "snapshot_id" in body else ("name", "os")
        for key in required:
            if not isinstance(body.get(key), str) or not body[key].strip():
                raise ApiError(400, f"'{key}' is required")
        _check_fields(body)
        if body.get("apps") is not None and not _is_str_list(body["apps"]):
            raise ApiError(400, "'apps' must be an array of strings")
        _check_enums(body)
        if body.get("fetch"):
            _check_fetch(body["fetch"])
        self._check_identifier(body.get("identifier"), None)

    def _check_identifier(self, identifier: str | None, own: FakeSandbox | None) -> None:
        if identifier is None:
            return
        if not IDENTIFIER_RE.fullmatch(identifier):
            raise ApiError(
                400,
                "'identifier' may contain only letters, digits, '_' and '-', must start "
                "with a letter and must not end with '-'",
            )
        if any(sb.identifier == identifier and sb is not own for sb in self.sandboxes.values()):
            raise ApiError(400, "'identifier' must be unique")

    # -- boot: fetch, first boot commands, then RUNNING

    async def _boot(self, sb: FakeSandbox) -> None:
        await asyncio.sleep(self.boot_delay_s)
        try:
            ok = await self._set_up(sb)
        except SandboxError as err:  # no local sandbox could be started at all
            sb.boot_logs.append(f"Sandbox failed to start: {err}")
            sb.status, sb.setup_status = "FAILED", "FAILED"
            sb.ready.set()
            return
        sb.setup_status = "SUCCESS" if ok else "FAILED"
        await asyncio.sleep(self.running_lag_s)
        sb.status = "RUNNING"  # the machine is up even when its setup failed
        sb.ready.set()

    async def _set_up(self, sb: FakeSandbox) -> bool:
        """Start the backing sandbox, fetch, run first boot commands; False if setup failed."""
        assert self._provider is not None
        spec = SandboxSpec(session_key=sb.id, tags=tuple(sb.tags))
        repository = sb.fetch[0]["repository"] if sb.fetch else None
        if repository is not None:
            sb.boot_logs.append(f"Fetching {repository} into {DATA_DIR}")
            folder = self.repos.get(repository)
            try:
                if folder is None:
                    raise SandboxError(f"repository {repository} not found")
                repo_url = Path(folder).resolve().as_uri()
                sb.local = await self._provider.create(
                    SandboxSpec(sb.id, repo_url=repo_url, tags=spec.tags)
                )
            except SandboxError as err:
                sb.boot_logs.append(f"Fetch failed: {err}")
                sb.local = await self._provider.create(spec)
                return False
        else:
            sb.local = await self._provider.create(spec)
        if sb.first_boot_commands:
            return await self._first_boot(sb, sb.local)
        return True

    async def _first_boot(self, sb: FakeSandbox, local: LocalSandbox) -> bool:
        if sb.gone:
            return False
        sb.boot_logs.append("Running first boot commands")
        script = "set -e\n" + (sb.first_boot_commands or "")
        sb.last_spawn = time.monotonic()
        result = await local.run_code("bash", script, SETUP_TIMEOUT_S)
        sb.boot_logs += _lines(result.stdout) + _lines(result.stderr)
        if result.exit_code == 0:
            sb.boot_logs.append("First boot commands finished")
            return True
        sb.boot_logs.append(f"First boot commands failed with exit code {_exit_code(result)}")
        return False

    def _forget(self, sb: FakeSandbox) -> None:
        self.sandboxes.pop(sb.id, None)
        self.deleted.add(sb.id)
        sb.gone = True
        sb.ready.set()

    async def _teardown(self, sb: FakeSandbox) -> None:
        """Stop the boot and the command watchers, then destroy the backing sandbox."""
        sb.gone = True  # from now on nothing new starts in it
        sb.ready.set()
        await _settle(sb.last_spawn)
        tasks = [t for t in (sb.boot_task, *sb.watchers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if sb.local is not None:
            await sb.local.destroy()

    # -- commands

    async def _run_command(self, request: web.Request) -> web.Response:
        sb = self._sandbox(request)
        command, runtime, language = _command_body(await _json_object(request))
        if request.query.get("fast") == "true":
            return web.json_response(await self._exec(sb, command, runtime, language))
        await sb.ready.wait()  # held while the sandbox boots (§5.9)
        if sb.gone:
            raise ApiError(404, "Sandbox not found")
        if sb.status != "RUNNING" or sb.local is None:
            raise ApiError(400, NOT_RUNNING)
        sb.last_spawn = time.monotonic()
        local_id = await sb.local.start_command(language, command)
        cmd = FakeCommand(_random_id(9), command, runtime, local_id, _now())
        sb.commands[cmd.id] = cmd
        watcher = asyncio.create_task(self._watch(sb.local, cmd))
        sb.watchers.add(watcher)
        watcher.add_done_callback(sb.watchers.discard)
        return web.json_response(self._command_view(sb, cmd))

    async def _exec_command(self, request: web.Request) -> web.Response:
        sb = self._sandbox(request)
        command, runtime, language = _command_body(await _json_object(request))
        return web.json_response(await self._exec(sb, command, runtime, language))

    async def _exec(
        self, sb: FakeSandbox, command: str, runtime: str, language: Language
    ) -> dict[str, Any]:
        """Run to completion; past the ceiling answer 400 and leave the process running."""
        if sb.status != "RUNNING" or sb.local is None:
            raise ApiError(400, NOT_RUNNING)
        sb.last_spawn = time.monotonic()
        local_id = await sb.local.start_command(language, command)
        deadline = time.monotonic() + self.exec_timeout_s
        while (state := await sb.local.command_state(local_id)).running:
            if time.monotonic() >= deadline:
                raise ApiError(
                    400,
                    f"Command did not finish on instance {sb.id} within {self.exec_timeout_s:g}s",
                )
            await asyncio.sleep(POLL_S)
        result = state.result
        return {
            "command": command,
            "runtime": runtime,
            "exit_code": _exit_code(result),
            "stdout": result.stdout.text,
            "stderr": result.stderr.text,
        }

    async def _watch(self, local: LocalSandbox, cmd: FakeCommand) -> None:
        """Flip the command's status once its process has ended (and the lag has passed)."""
        with contextlib.suppress(SandboxError):  # the sandbox went away
            while True:
                state = await local.command_state(cmd.local_id)
                if not state.running:
                    break
                await asyncio.sleep(POLL_S)
            cmd.hold_status(self.status_lag_s)
            while True:  # a log stream that ends meanwhile pushes flip_at back
                wait = cmd.flip_at - time.monotonic()
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            cmd.finish(state.result)

    async def _list_commands(self, request: web.Request) -> web.Response:
        sb = self._sandbox(request)
        limit = _int_query(request, "limit", 50, 1, 200)
        commands = list(reversed(sb.commands.values()))  # newest first
        if cursor := request.query.get("cursor"):
            ids = [c.id for c in commands]
            if cursor not in ids:
                raise ApiError(400, f"Invalid cursor {cursor!r}")
            commands = commands[ids.index(cursor) + 1 :]
        views = [self._command_view(sb, c) for c in commands[:limit]]
        return web.json_response({"url": f"{self._sandbox_url(sb)}/commands", "commands": views})

    async def _get_command(self, request: web.Request) -> web.Response:
        sb, cmd = self._command(request)
        return web.json_response(self._command_view(sb, cmd))

    async def _terminate_command(self, request: web.Request) -> web.Response:
        sb, cmd = self._command(request)
        if sb.local is not None:
            await _settle(cmd.started)
            await sb.local.kill_command(cmd.local_id)  # a no-op once it has ended
        return web.json_response(self._command_view(sb, cmd))

    async def _command_logs(self, request: web.Request) -> web.StreamResponse:
        sb, cmd = self._command(request)
        assert sb.local is not None
        if request.query.get("follow") == "true":
            return await self._follow(request, sb.local, cmd)
        state = await sb.local.command_state(cmd.local_id)
        out, err = _LineCursor(), _LineCursor()
        final = not state.running
        body = _jsonl("STDOUT", out.take(state.result.stdout, final))
        body += _jsonl("STDERR", err.take(state.result.stderr, final))
        return web.Response(body=body, headers={"Content-Type": JSONL})

    async def _follow(
        self, request: web.Request, local: LocalSandbox, cmd: FakeCommand
    ) -> web.StreamResponse:
        """Stream new complete lines as they appear; flush the rest and close at the end."""
        response = web.StreamResponse(headers={"Content-Type": JSONL})
        await response.prepare(request)
        out, err = _LineCursor(), _LineCursor()
        try:
            while True:
                state = await local.command_state(cmd.local_id)
                final = not state.running
                chunk = _jsonl("STDOUT", out.take(state.result.stdout, final))
                chunk += _jsonl("STDERR", err.take(state.result.stderr, final))
                if chunk:
                    await response.write(chunk)
                if final:
                    break
                await asyncio.sleep(POLL_S)
        except SandboxError:
            pass  # the sandbox went away: the stream just ends
        except ConnectionError:
            return response  # the client left
        cmd.hold_status(self.status_lag_s)
        await response.write_eof()
        return response

    def _command(self, request: web.Request) -> tuple[FakeSandbox, FakeCommand]:
        sb = self._sandbox(request)
        cmd = sb.commands.get(request.match_info["cid"])
        if cmd is None:
            raise ApiError(404, "Command not found")
        return sb, cmd

    # -- files

    async def _list_content(self, request: web.Request) -> web.Response:
        sb, local = self._running(request)
        path = _sandbox_path(request)
        found = await _stat(local, path)
        if found is None:
            raise ApiError(400, PATH_NOT_FOUND)
        kind, size = found
        if path in VIRTUAL_DIRS:
            items = [self._item(sb, child, "DIR") for child in VIRTUAL_DIRS[path]]
        elif kind == "DIR":
            entries = await local.list_dir(path)
            items = [self._entry_item(sb, path, entry) for entry in entries]
        else:
            items = [self._item(sb, path, "FILE") | {"size": size}]  # a file: itself
        view = self._item(sb, path, "DIR")
        return web.json_response(
            {"url": view["url"], "html_url": view["html_url"], "contents": items}
        )

    async def _make_dir(self, request: web.Request) -> web.Response:
        sb, local = self._running(request)
        path = _sandbox_path(request)
        if path in VIRTUAL_DIRS or path in (WORK_DIR, DATA_DIR):
            raise ApiError(409, f"{path} already exists")
        result = await local.run_code(
            "bash", MKDIR_SH.format(path=shlex.quote(path)), FILE_OP_TIMEOUT_S
        )
        if result.exit_code == EXIT_EXISTS:
            raise ApiError(409, f"{path} already exists")
        if result.exit_code == EXIT_NO_PARENT:
            raise ApiError(400, PATH_NOT_FOUND)
        if result.exit_code != 0:
            raise ApiError(400, last_line(result.stderr.text) or f"Cannot create {path}")
        return web.json_response(self._item(sb, path, "DIR"), status=201)

    async def _upload(self, request: web.Request) -> web.Response:
        sb, local = self._running(request)
        path = _sandbox_path(request)
        if request.content_type != "multipart/form-data":
            raise ApiError(400, "Expected a multipart/form-data body with one part named 'file'")
        parent = await _stat(local, posixpath.dirname(path))
        if path in VIRTUAL_DIRS or parent is None or parent[0] != "DIR":
            raise ApiError(400, PATH_NOT_FOUND)  # the parent folder must exist
        if (found := await _stat(local, path)) is not None and found[0] == "DIR":
            raise ApiError(400, f"{path} is a directory")
        reader = await request.multipart()
        part = await reader.next()
        if not isinstance(part, BodyPartReader) or part.name != "file":
            raise ApiError(400, "The multipart body must have one part named 'file'")
        size = await local.upload(path, _part_chunks(part))
        if await reader.next() is not None:
            await local.run_code("bash", f"rm -f -- {shlex.quote(path)}", FILE_OP_TIMEOUT_S)
            raise ApiError(400, "The multipart body must have exactly one part")
        return web.json_response(self._item(sb, path, "FILE") | {"size": size}, status=201)

    async def _download(self, request: web.Request) -> web.StreamResponse:
        _, local = self._running(request)
        path = _sandbox_path(request)
        found = await _stat(local, path)
        if found is None or path in VIRTUAL_DIRS:
            raise ApiError(400, PATH_NOT_FOUND)
        if found[0] == "DIR":
            return await self._download_dir(request, local, path)
        return await _send(request, local.download(path), posixpath.basename(path))

    async def _download_dir(
        self, request: web.Request, local: LocalSandbox, path: str
    ) -> web.StreamResponse:
        """A folder comes back as a tar.gz archive, built in the sandbox and then removed."""
        name = f".buddy-download-{secrets.token_hex(6)}.tar.gz"
        archive = f"{WORK_DIR}/{name}"
        script = f"tar -czf {archive} --exclude=./{name} -C {shlex.quote(path)} ."
        try:
            result = await local.run_code("bash", script, FILE_OP_TIMEOUT_S)
            if result.exit_code != 0:
                raise ApiError(400, f"Cannot archive {path}: {result.stderr.text.strip()}")
            filename = f"{posixpath.basename(path)}.tar.gz"
            return await _send(request, local.download(archive), filename, "application/gzip")
        finally:
            with contextlib.suppress(SandboxError):  # gone with its sandbox
                await local.run_code("bash", f"rm -f -- {archive}", FILE_OP_TIMEOUT_S)

    # -- views

    def _ws_url(self) -> str:
        return f"{self.base_url}/workspaces/{self.workspace}"

    def _project_html(self) -> str:
        return f"https://app.buddy.works/{self.workspace}/{self.project}/sandboxes"

    def _sandbox_url(self, sb: FakeSandbox) -> str:
        return f"{self._ws_url()}/sandboxes/{sb.id}"

    def _id_view(self, sb: FakeSandbox) -> dict[str, Any]:
        return _compact(
            {
                "url": self._sandbox_url(sb),
                "html_url": f"{self._project_html()}/{sb.id}",
                "id": sb.id,
                "identifier": sb.identifier,
                "name": sb.name,
                "status": sb.status,
                "setup_status": sb.setup_status,
            }
        )

    def _view(self, sb: FakeSandbox) -> dict[str, Any]:
        project = {"name": self.project, "display_name": self.project, "status": "ACTIVE"}
        return self._id_view(sb) | _compact(
            {
                "os": sb.os,
                "resources": sb.resources,
                "first_boot_commands": sb.first_boot_commands,
                "app_dir": sb.app_dir,
                "apps": sb.apps,
                "fetch": sb.fetch,
                "timeout": sb.timeout,
                "tags": sb.tags,
                "boot_logs": sb.boot_logs,
                "endpoints": sb.endpoints,
                "variables": sb.variables,
                "permissions": sb.permissions,
                "note": sb.note,
                "agent_note": sb.agent_note,
                "scope": "PROJECT",
                "project": project,
                "create_date": sb.create_date,
            }
        )

    def _command_view(self, sb: FakeSandbox, cmd: FakeCommand) -> dict[str, Any]:
        url = f"{self._sandbox_url(sb)}/commands/{cmd.id}"
        return {
            "url": url,
            "html_url": f"{self._project_html()}/{sb.id}/commands/{cmd.id}",
            "id": cmd.id,
            "command": cmd.command,
            "runtime": cmd.runtime,
            "status": cmd.status,
            "exit_code": cmd.exit_code,
            "start_date": cmd.start_date,
            "finish_date": cmd.finish_date,
            "logs_url": f"{url}/logs",
        }

    def _entry_item(self, sb: FakeSandbox, folder: str, entry: FileEntry) -> dict[str, Any]:
        """A listed entry; the API knows FILE and DIR only, so links and others are FILE."""
        path = posixpath.join(folder, entry.name)
        if entry.kind == "dir":
            return self._item(sb, path, "DIR")
        return self._item(sb, path, "FILE") | {"size": entry.size}

    def _item(self, sb: FakeSandbox, path: str, kind: str) -> dict[str, Any]:
        rel = path.lstrip("/")
        return {
            "url": f"{self._sandbox_url(sb)}/content/{rel}",
            "html_url": f"{self._project_html()}/{sb.id}/files/{rel}",
            "type": kind,
            "name": posixpath.basename(path),
            "path": path,
        }


# -- request helpers


async def _peek_json(request: web.Request) -> Any | None:
    """The JSON body for the request log (None for multipart, empty or non-JSON bodies)."""
    if not request.body_exists or request.content_type.startswith("multipart/"):
        return None
    raw = await request.read()  # cached: the handler reads it again
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


async def _json_object(request: web.Request) -> dict[str, Any]:
    raw = await request.read()  # cached by the middleware's read
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "The request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    return body


def _int_query(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(400, f"'{name}' must be an integer from {low} to {high}")
    return int(raw)


def _check_fields(body: dict[str, Any]) -> None:
    for key, (ok, what) in FIELD_CHECKS.items():
        if body.get(key) is not None and not ok(body[key]):
            raise ApiError(400, f"'{key}' must be {what}")


def _check_enums(body: dict[str, Any]) -> None:
    for key, allowed in (("os", OS_VALUES), ("resources", RESOURCES)):
        if body.get(key) is not None and body[key] not in allowed:
            raise ApiError(400, f"'{key}' must be one of {', '.join(allowed)}")


def _check_fetch(items: list[dict[str, Any]]) -> None:
    """One PUBLIC_REPO item into /buddy/data: all the local backend can check out."""
    for item in items:
        kind = item.get("type")
        if kind not in FETCH_TYPES:
            raise ApiError(400, f"fetch 'type' must be one of {', '.join(FETCH_TYPES)}")
        if kind != "PUBLIC_REPO":
            raise ApiError(400, f"fetch type {kind} is not supported by the fake")
        if not isinstance(item.get("repository"), str) or not item["repository"]:
            raise ApiError(400, "fetch 'repository' is required for PUBLIC_REPO")
        if item.get("path") not in (None, DATA_DIR):
            raise ApiError(400, f"the fake fetches into {DATA_DIR} only")
    if len(items) > 1:
        raise ApiError(400, "the fake supports a single fetch item")


def _command_body(body: dict[str, Any]) -> tuple[str, str, Language]:
    command, runtime = body.get("command"), body.get("runtime") or "BASH"
    if not isinstance(command, str) or not command:
        raise ApiError(400, "'command' is required")
    if runtime not in RUNTIMES:
        raise ApiError(400, f"'runtime' must be one of {', '.join(RUNTIMES)}")
    language = RUNTIMES[runtime]
    if language is None:
        raise ApiError(400, f"runtime {runtime} is not supported by the fake")
    return command, runtime, language


def _sandbox_path(request: web.Request) -> str:
    """The absolute sandbox path of a content/download URL, or 400."""
    raw = request.match_info["path"]
    if raw.startswith("/"):  # an empty path segment: the client left the leading slash in
        raise ApiError(400, INVALID_URL)
    path = posixpath.normpath("/" + raw)
    if path in VIRTUAL_DIRS or any(
        path == d or path.startswith(d + "/") for d in (WORK_DIR, DATA_DIR)
    ):
        return path
    raise ApiError(400, PATH_NOT_FOUND)


async def _stat(local: LocalSandbox, path: str) -> tuple[str, int] | None:
    """("DIR", 0) or ("FILE", size), or None when `path` does not exist."""
    if path in VIRTUAL_DIRS:
        return ("DIR", 0)
    result = await local.run_code("bash", STAT_SH.format(path=shlex.quote(path)), FILE_OP_TIMEOUT_S)
    match result.stdout.text.split():
        case ["DIR"]:
            return ("DIR", 0)
        case ["FILE", size]:
            return ("FILE", int(size))
    return None


async def _part_chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(64 * 1024):
        yield chunk


# -- response helpers


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.json_response({"errors": [{"message": message}]}, status=status, headers=headers)


async def _fault_response(request: web.Request, fault: _Fault) -> web.StreamResponse:
    if fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault.drop:
        if request.transport is not None:  # None: the client has already left
            request.transport.close()
        return web.StreamResponse()
    headers = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
        headers["X-Rate-Limit-Reset"] = str(int(time.time() + fault.retry_after + 0.999))
    message = fault.message or DEFAULT_FAULT_MESSAGES.get(fault.status, "Injected failure")
    return _error(fault.status, message, headers)


async def _send(
    request: web.Request,
    chunks: AsyncIterator[bytes],
    filename: str,
    content_type: str = "application/octet-stream",
) -> web.StreamResponse:
    """Stream a download; errors before the first byte still get a proper status."""
    try:
        first = await anext(chunks, b"")
        response = web.StreamResponse(
            headers={
                "Content-Type": content_type,
                "Content-Disposition": f'attachment; filename="{filename}"',
            }
        )
        await response.prepare(request)
        await response.write(first)
        async for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        if isinstance(chunks, AsyncGenerator):
            await chunks.aclose()  # stops the reader in the sandbox if the client left early


class _LineCursor:
    """Hands out the complete new lines of a growing captured stream, once each."""

    def __init__(self) -> None:
        self.sent = 0  # characters of the text already handed out

    def take(self, output: Output, final: bool) -> list[str]:
        if output.cut_bytes and not final:
            return []  # past the capture cap the text is no longer append-only
        new = output.text[self.sent :]
        end = len(new) if final else new.rfind("\n") + 1
        self.sent += end
        lines = new[:end].split("\n")
        if lines[-1] == "":
            lines.pop()  # the text ended with a newline (or there was nothing new)
        return lines


def _jsonl(kind: str, lines: list[str]) -> bytes:
    records = (json.dumps({"type": kind, "data": line}, ensure_ascii=False) for line in lines)
    return "".join(record + "\n" for record in records).encode()


def _lines(output: Output) -> list[str]:
    return output.text.splitlines()


async def _settle(since: float) -> None:
    """Wait until `KILL_SETTLE_S` has passed since `since` (a monotonic time)."""
    delay = since + KILL_SETTLE_S - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


def _exit_code(result: ExecResult) -> int:
    if result.exit_code is None:  # killed on request (or at the wall-clock cap)
        return KILLED_EXIT_CODE
    return 128 - result.exit_code if result.exit_code < 0 else result.exit_code


def _app(command: str) -> dict[str, Any]:
    return {"id": _random_id(7), "command": command, "app_status": "NONE"}


def _compact(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if v is not None}


def _random_id(length: int) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
