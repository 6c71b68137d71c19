"""Snapshots in the fake Buddy (§5.17): a snapshot holds a sandbox's disk as it was
(/buddy/work as a tar.gz made inside the sandbox, /buddy/data copied on the host); a
sandbox created with its `snapshot_id` starts with that disk. A snapshot is CREATING for a
moment, and updates to its sandbox are refused meanwhile; an id the fake did not make is
404 "Snapshot not found" (the document's 404 for a missing snapshot)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shlex
import shutil
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from aiohttp import web

from tests.fakes.buddy.bodies import KNOWN, check_known, json_object
from tests.fakes.buddy.state import (
    FILE_OP_TIMEOUT_S,
    IN_PROGRESS,
    ApiError,
    FakeSandbox,
    FakeSnapshot,
    now_iso,
    random_id,
)
from tests.fakes.buddy.vm import WORK_DIR, Vm, VmError

if TYPE_CHECKING:
    from tests.fakes.buddy.api import FakeBuddy

GB = 1 << 30
TAR_WARNINGS = 1  # GNU tar: a file changed while it was read; the archive is still good


class Snapshots:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server
        self.snapshots = server.snapshots
        self.root = server.sandbox_root / ".snapshots"  # not a sandbox id

    def add_routes(self, router: web.UrlDispatcher, ws: str, one: str) -> None:
        """Before the sandbox routes: /sandboxes/snapshots is not a sandbox id."""
        router.add_get(f"{ws}/sandboxes/snapshots", self.list_all)
        router.add_delete(f"{ws}/sandboxes/snapshots/{{snap}}", self.delete)
        router.add_post(f"{one}/snapshots", self.create)
        router.add_get(f"{one}/snapshots", self.list_of_sandbox)
        router.add_get(f"{one}/snapshots/{{snap}}", self.get)
        router.add_delete(f"{one}/snapshots/{{snap}}", self.delete)

    def ready(self, snapshot_id: str) -> FakeSnapshot:
        """The snapshot a create names, if it can be restored."""
        snap = self.snapshots.get(snapshot_id)
        if snap is None:
            raise ApiError(404, "Snapshot not found")
        if snap.status != "CREATED":
            raise ApiError(400, f"Snapshot {snapshot_id} is not ready (status {snap.status})")
        return snap

    # -- routes

    async def create(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        body = await json_object(request) if await request.read() else {}
        check_known(body, KNOWN["snapshot"], "a snapshot request")
        if sb.busy is not None or sb.vm is None or sb.status not in ("RUNNING", "STOPPED"):
            raise ApiError(400, IN_PROGRESS)
        snap = FakeSnapshot(random_id(13), body.get("name"), sb.id, sb.os, now_iso())
        self.snapshots[snap.id] = snap
        sb.busy = "snapshot"
        task = asyncio.create_task(self._take(sb, sb.vm, snap))
        sb.watchers.add(task)
        task.add_done_callback(sb.watchers.discard)
        return web.json_response(self.server.views.snapshot(snap), status=201)

    async def list_all(self, request: web.Request) -> web.Response:
        self.server.check_project(request)
        views = [self.server.views.snapshot(snap) for snap in self.snapshots.values()]
        return web.json_response({"snapshots": views})

    async def list_of_sandbox(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        mine = [s for s in self.snapshots.values() if s.sandbox_id == sb.id]
        return web.json_response({"snapshots": [self.server.views.snapshot(s) for s in mine]})

    async def get(self, request: web.Request) -> web.Response:
        return web.json_response(self.server.views.snapshot(self._named(request)))

    async def delete(self, request: web.Request) -> web.Response:
        snap = self._named(request)
        del self.snapshots[snap.id]
        if snap.data is not None:
            await asyncio.to_thread(shutil.rmtree, snap.data, True)
        return web.Response(status=204)

    def _named(self, request: web.Request) -> FakeSnapshot:
        """The snapshot a URL names (under its own sandbox's URL, if given there)."""
        sid = self.server.sandbox(request).id if "sid" in request.match_info else None
        snap = self.snapshots.get(request.match_info["snap"])
        if snap is None or sid not in (None, snap.sandbox_id):
            raise ApiError(404, "Snapshot not found")
        return snap

    # -- taking and restoring a disk

    async def _take(self, sb: FakeSandbox, vm: Vm, snap: FakeSnapshot) -> None:
        try:
            snap.work = await _archive_work(vm)
            snap.data = str(self.root / snap.id / "data")
            await asyncio.to_thread(shutil.copytree, vm.data, snap.data, symlinks=True)
            snap.size = -(-len(snap.work) // GB)
            snap.status = "CREATED"
        except (VmError, OSError):
            snap.status = "FAILED"
        finally:
            sb.busy = None

    async def restore(self, snap: FakeSnapshot, vm: Vm) -> None:
        """Put the snapshot's disk into a new sandbox's VM."""
        if snap.data is not None:
            await asyncio.to_thread(
                shutil.copytree, snap.data, vm.data, symlinks=True, dirs_exist_ok=True
            )
        archive = f"{WORK_DIR}/.buddy-restore-{secrets.token_hex(6)}.tar.gz"
        await vm.write(archive, _once(snap.work))
        result = await vm.run(
            f"tar -xzf {archive} -C {WORK_DIR}; r=$?; rm -f {archive}; exit $r", 60
        )
        if result.exit_code != 0:
            raise VmError(f"restoring snapshot {snap.id} failed: {result.stderr}")

    def clean_up(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


async def _archive_work(vm: Vm) -> bytes:
    """/buddy/work as a tar.gz, made inside the sandbox (FIFOs and links stay what they are)."""
    name = f".buddy-snapshot-{secrets.token_hex(6)}.tar.gz"
    archive = f"{WORK_DIR}/{name}"
    script = f"tar -czf {archive} --exclude=./{name} -C {WORK_DIR} ."
    try:
        result = await vm.run(script, FILE_OP_TIMEOUT_S)
        if result.exit_code not in (0, TAR_WARNINGS):
            raise VmError(f"archiving {WORK_DIR} failed: {result.stderr}")
        return b"".join([chunk async for chunk in vm.read(archive)])
    finally:
        with contextlib.suppress(VmError):
            await vm.run(f"rm -f -- {shlex.quote(archive)}", FILE_OP_TIMEOUT_S)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data
