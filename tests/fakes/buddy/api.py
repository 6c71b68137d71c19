"""A fake Buddy.Works Sandbox REST API server for tests.

A real aiohttp server on 127.0.0.1 with the paths, JSON shapes and status codes of the
Buddy Sandbox API notes (buddy-sandbox-api.md, §3-§7). Every fake sandbox is a `vm.Vm`:
a disk folder and bubblewrap containers of the fake's own (nothing of the bot's sandbox
code), so commands really run, isolated, and files really land. Like a Buddy VM, and
unlike the bot's own local sandboxes, it shares this machine's network and lets commands
make namespaces of their own::

    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as buddy:
        buddy.fail_next(2, method="GET", path=r"/commands/", status=503)
        async with httpx.AsyncClient(base_url=buddy.base_url, headers=auth) as http:
            await http.post("/workspaces/acme/sandboxes?project_name=analytics", json=...)

Where the document is unsure the fake picks the behaviour that is harder on a client:
missing paths give 400 "Path not find in browser", a malformed sandbox id gives 400
"Invalid url", `setup_status` turns SUCCESS a moment before `status` turns RUNNING, and a
finished command still reads INPROGRESS for `status_lag_s` after its log stream ends, and a
sandbox whose disk is put back (made from a snapshot, or started after a stop) is RESTORING
for `restore_delay_s` on its way to RUNNING.

This module holds the server, its test helpers and the checks every request goes through;
the routes live in `sandboxes`, `commands`, `files`, `power`
(start, stop, and the stop after `timeout` seconds without activity) and
`snapshots`, the boot in
`boot`, the state and views in `state` and `views`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.buddy.access import (
    ALL_SCOPES,
    RATE_HEADERS,
    Fault,
    RateLimit,
    add_rate_headers,
    as_buddy_answers,
    check_access,
    fault_response,
)
from tests.fakes.buddy.bodies import (
    peek_json,
)
from tests.fakes.buddy.boot import Boot
from tests.fakes.buddy.commands import Commands
from tests.fakes.buddy.files import Files
from tests.fakes.buddy.power import Power
from tests.fakes.buddy.sandboxes import Sandboxes
from tests.fakes.buddy.snapshots import Snapshots
from tests.fakes.buddy.state import (
    INVALID_URL,
    NOT_RUNNING,
    SANDBOX_ID_RE,
    ApiError,
    FakeCommand,
    FakeSandbox,
    FakeSnapshot,
    RecordedRequest,
    settle,
)
from tests.fakes.buddy.views import Views
from tests.fakes.buddy.vm import Vm, VmShell
from tests.fakes.loopback import serve

__all__ = ["FakeBuddy", "FakeCommand", "FakeSandbox", "RecordedRequest"]


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
        restore_delay_s: float | None = None,
        repos: Mapping[str, Path] | None = None,
        exec_timeout_s: float = 60.0,
        inactivity_timeout_s: float | None = None,
        scopes: Collection[str] = ALL_SCOPES,
        port: int = 0,
        vm_shell: VmShell | None = None,
    ) -> None:
        self.sandbox_root = Path(sandbox_root)
        self.vm_shell = vm_shell or VmShell()  # how the VMs' bash starts each command
        self.port = port  # 0: any free port
        self.workspace = workspace
        self.project = project
        self.token = token
        self.boot_delay_s = boot_delay_s
        # RESTORING lasts this long (default: as long as the boot): a disk is being put back,
        # from a snapshot or after a stop (see `power`).
        self.restore_delay_s = boot_delay_s if restore_delay_s is None else restore_delay_s
        self.repos: dict[str, Path] = dict(repos or {})
        self.exec_timeout_s = exec_timeout_s  # the sync exec ceiling (60 s upstream)
        self.running_lag_s = 0.05  # setup SUCCESS/FAILED comes this long before RUNNING
        self.status_lag_s = 0.1  # a finished command reads INPROGRESS this much longer
        # Stop a sandbox after this long without activity, whatever its own `timeout` says
        # (None: its `timeout`, at least 60 s from the bot, too long for most tests).
        self.inactivity_timeout_s = inactivity_timeout_s
        self.stop_delay_s = 0.05  # STOPPING lasts at least this long
        self.api_enabled = True
        self.scopes = set(scopes)  # the token's scopes
        self.rate_limit = RateLimit()  # the token's: 1000 requests an hour (see RateLimit)
        self.base_url = ""
        self.views = Views("", workspace, project)
        self.requests: list[RecordedRequest] = []
        self.sandboxes: dict[str, FakeSandbox] = {}
        self.snapshots: dict[str, FakeSnapshot] = {}
        self.deleted: set[str] = set()
        self._faults: list[Fault] = []
        self._teardowns: set[asyncio.Task[None]] = set()
        self._runner: web.AppRunner | None = None
        self.boot = Boot(self)
        self.power = Power(self)
        self.snapshot_api = Snapshots(self)

    # -- lifecycle

    async def __aenter__(self) -> FakeBuddy:
        app = web.Application(middlewares=[self._middleware])
        app.on_response_prepare.append(add_rate_headers)
        self._add_routes(app.router)
        self._runner, self.base_url = await serve(app, self.port)
        self.views.base_url = self.base_url
        self.power.start_watching()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.power.stop_watching()
        await asyncio.gather(
            *(self.teardown(sb) for sb in self.sandboxes.values()), *self._teardowns
        )
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await asyncio.to_thread(self.snapshot_api.clean_up)

    def new_vm(self, sb: FakeSandbox) -> Vm:
        """A fresh disk for `sb` (under `sandbox_root`, where tests look for leftovers)."""
        return Vm(self.sandbox_root / sb.id, sb.identifier or sb.id, self.vm_shell)

    # -- test helpers

    def fail_next(
        self,
        n: int,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int = 503,
        reset_after: float | None = None,
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
        client cannot tell (for answers that are not streamed). A 429 says the limit resets
        `reset_after` seconds from now (X-Rate-Limit-Reset, whole Unix seconds).
        """
        fault = Fault(n, method, path, status, reset_after, message, drop, delay_s, after)
        self._faults.append(fault)

    def vanish(self, sandbox_id: str) -> None:
        """Delete a sandbox behind the client's back; its processes are killed shortly."""
        sb = self.sandboxes[sandbox_id]
        self.forget(sb)
        task = asyncio.create_task(self.teardown(sb))
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
        self.snapshot_api.add_routes(router, ws, one)
        Sandboxes(self).add_routes(router, ws, one)
        Commands(self).add_routes(router, one)
        Files(self).add_routes(router, one)
        self.power.add_routes(router, one)

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
            record.status = response.status
            if fault is None:
                return response
        response = await fault_response(request, fault, self.rate_limit)
        record.status = 0 if fault.drop else response.status
        return response

    async def _handle(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Any],
        record: RecordedRequest,
    ) -> web.StreamResponse:
        """The real answer, with the API's errors as Buddy words them."""

        async def answer() -> web.StreamResponse:
            record.json = await peek_json(request)
            check_access(request, self.token, self.workspace, self.api_enabled, self.scopes)
            allowed, request[RATE_HEADERS] = self.rate_limit.take()
            if not allowed:
                raise ApiError(429, "Too many requests")
            return await handler(request)

        return await as_buddy_answers(request, answer())

    def _take_fault(self, record: RecordedRequest) -> Fault | None:
        for fault in self._faults:
            if fault.remaining > 0 and fault.matches(record):
                fault.remaining -= 1
                return fault
        return None

    def check_project(self, request: web.Request) -> None:
        name = request.query.get("project_name")
        if not name:
            raise ApiError(400, "project_name is required")
        if name != self.project:
            raise ApiError(404, f"Project {name!r} not found")

    def sandbox(self, request: web.Request) -> FakeSandbox:
        """The sandbox a per-sandbox URL names, or the API's error."""
        sid = request.match_info["sid"]
        if not SANDBOX_ID_RE.fullmatch(sid):
            raise ApiError(400, INVALID_URL)
        sb = self.sandboxes.get(sid)
        if sb is None:
            raise ApiError(404, "Sandbox not found")
        return sb

    def running(self, request: web.Request) -> tuple[FakeSandbox, Vm]:
        """The sandbox a URL names, if it is running (file calls need that)."""
        sb = self.sandbox(request)
        if sb.status != "RUNNING" or sb.vm is None:
            raise ApiError(400, NOT_RUNNING)
        return sb, sb.vm

    def forget(self, sb: FakeSandbox) -> None:
        """The sandbox is deleted: every later call about it answers 404."""
        self.sandboxes.pop(sb.id, None)
        self.deleted.add(sb.id)
        sb.gone = True
        sb.ready.set()

    async def teardown(self, sb: FakeSandbox) -> None:
        """Stop the boot and the command watchers, then destroy the sandbox's VM."""
        sb.gone = True  # from now on nothing new starts in it
        sb.ready.set()
        await settle(sb.last_spawn)
        tasks = [t for t in (sb.boot_task, *sb.watchers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if sb.vm is not None:
            await sb.vm.destroy()
