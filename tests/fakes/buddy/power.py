"""Starting and stopping fake sandboxes (§5.8, §6.4): the start, stop and restart routes,
and the stop Buddy makes on its own after `timeout` seconds without activity.

A stop ends every process in the sandbox (commands report FAILED, as killed) and keeps its
disk; a start brings it back to RUNNING without running the first boot commands again,
through RESTORING while its disk is attached again (STARTING -> RESTORING -> RUNNING; the
document's state machine allows it, §6.1 [INF], and it is the harder case for a client). A
restart of a running sandbox keeps its disk attached: STARTING -> RUNNING.
Only a command's start counts as activity, the least the document promises.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from aiohttp import web

from tests.fakes.buddy.bodies import empty_body
from tests.fakes.buddy.state import ApiError, FakeSandbox, settle
from tests.fakes.buddy.vm import result_of

if TYPE_CHECKING:
    from tests.fakes.buddy.api import FakeBuddy

IDLE_POLL_S = 0.05  # how often the inactivity countdowns are checked


class Power:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server
        self._watcher: asyncio.Task[None] | None = None

    def add_routes(self, router: web.UrlDispatcher, one: str) -> None:
        router.add_post(f"{one}/start", self.start)
        router.add_post(f"{one}/stop", self.stop)
        router.add_post(f"{one}/restart", self.restart)

    # -- routes: each answers at once with the sandbox in its transitional state

    async def start(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        await empty_body(request)
        if sb.status == "RUNNING":
            raise ApiError(400, "Sandbox is already running")
        if sb.status != "STOPPED":
            raise ApiError(400, f"Cannot start sandbox in status {sb.status}")
        self._boot_again(sb, "start")
        return web.json_response(self.server.views.sandbox(sb))

    async def stop(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        await empty_body(request)
        if sb.status == "STOPPED":
            raise ApiError(400, "Sandbox is already stopped")
        if sb.status != "RUNNING":
            raise ApiError(400, f"Cannot stop sandbox in status {sb.status}")
        self.begin_stop(sb, "stop")
        return web.json_response(self.server.views.sandbox(sb))

    async def restart(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        await empty_body(request)
        if sb.status not in ("RUNNING", "STOPPED"):
            raise ApiError(400, f"Cannot restart sandbox in status {sb.status}")
        self._boot_again(sb, "restart")
        return web.json_response(self.server.views.sandbox(sb))

    # -- transitions

    def begin_stop(self, sb: FakeSandbox, why: str) -> None:
        """RUNNING -> STOPPING now, STOPPED once every process has ended."""
        sb.set_status("STOPPING", why)
        sb.boot_task = asyncio.create_task(self._stop(sb))

    async def _stop(self, sb: FakeSandbox) -> None:
        await self._halt(sb)
        await asyncio.sleep(self.server.stop_delay_s)
        if not sb.gone:
            sb.boot_logs.append("Sandbox stopped")
            sb.set_status("STOPPED")

    async def _halt(self, sb: FakeSandbox) -> None:
        """End every process of the sandbox; its files stay. Its commands read FAILED from
        now on, without the lag a command ending on its own has."""
        if sb.vm is not None:
            await settle(sb.last_spawn)
            await sb.vm.stop_all()
        for cmd in sb.commands.values():
            cmd.finish(result_of(cmd.process).exit_code)

    def _boot_again(self, sb: FakeSandbox, why: str) -> None:
        """-> STARTING; commands sent meanwhile are held until RUNNING (as at first boot)."""
        previous = sb.status
        sb.set_status("STARTING", why)
        sb.ready = asyncio.Event()
        sb.boot_task = asyncio.create_task(self._start(sb, halt=previous == "RUNNING"))

    async def _start(self, sb: FakeSandbox, *, halt: bool) -> None:
        if halt:  # a restart of a running sandbox ends its processes first
            await self._halt(sb)
        await asyncio.sleep(self.server.boot_delay_s)
        if not halt and not sb.gone:  # it was stopped: its disk comes back
            sb.set_status("RESTORING", "disk attached again")
            await asyncio.sleep(self.server.restore_delay_s)
        if not sb.gone:
            sb.boot_logs.append("Sandbox started")
            sb.set_status("RUNNING")
            sb.touch()
        sb.ready.set()

    # -- the inactivity countdown

    def start_watching(self) -> None:
        self._watcher = asyncio.create_task(self._watch_idle())

    async def stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    async def _watch_idle(self) -> None:
        while True:
            await asyncio.sleep(IDLE_POLL_S)
            now = time.monotonic()
            for sb in list(self.server.sandboxes.values()):
                limit = self.server.inactivity_timeout_s or sb.timeout
                idle = now - sb.active_at
                if sb.status == "RUNNING" and sb.busy is None and limit and idle >= limit:
                    self.begin_stop(sb, f"no activity for {limit:g} s")
