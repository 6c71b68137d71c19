"""The fake Buddy's sandbox routes (§5.1-§5.7): identifiers, list, create, get, update,
delete."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes.buddy.bodies import (
    CREATE_FIELDS,
    PATCHABLE,
    check_create,
    check_identifier_shape,
    check_patch,
    json_object,
)
from tests.fakes.buddy.state import (
    IN_PROGRESS,
    OS_VALUES,
    ApiError,
    FakeSandbox,
    now_iso,
    random_id,
)

if TYPE_CHECKING:
    from tests.fakes.buddy.api import FakeBuddy


class Sandboxes:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server

    def add_routes(self, router: web.UrlDispatcher, ws: str, one: str) -> None:
        router.add_get(f"{ws}/identifiers", self.identifiers)
        router.add_get(f"{ws}/sandboxes", self.list_sandboxes)
        router.add_post(f"{ws}/sandboxes", self.create_sandbox)
        router.add_get(one, self.get_sandbox)
        router.add_patch(one, self.update_sandbox)
        router.add_delete(one, self.delete_sandbox)

    async def identifiers(self, request: web.Request) -> web.Response:
        server = self.server
        view: dict[str, Any] = {
            "url": f"{server.views.ws_url()}/identifiers",
            "html_url": f"https://app.buddy.works/{server.workspace}",
            "domain": server.workspace,
        }
        if request.query.get("project") == server.project:  # else: no scope, nothing found
            view["project_identifier"] = server.project
            wanted = request.query.get("sandbox")
            found = [sb for sb in server.sandboxes.values() if wanted in (sb.identifier, sb.id)]
            if wanted and found:
                view["sandbox_id"] = found[0].id
        return web.json_response(view)

    async def list_sandboxes(self, request: web.Request) -> web.Response:
        views = self.server.views
        self.server.check_project(request)
        items = [views.id_view(sb) for sb in self.server.sandboxes.values()]
        view = {"url": f"{views.ws_url()}/sandboxes", "html_url": views.project_html()}
        return web.json_response({**view, "sandboxes": items})

    async def create_sandbox(self, request: web.Request) -> web.Response:
        self.server.check_project(request)
        body = await json_object(request)
        check_create(body)
        self._check_identifier(body.get("identifier"), None)
        fields = {key: body[key] for key in CREATE_FIELDS if body.get(key) is not None}
        fields["apps"] = [_app(command) for command in fields.get("apps", [])]
        if "snapshot_id" in fields:  # a snapshot brings its own os
            fields.setdefault("os", self.server.snapshot_api.ready(fields["snapshot_id"]).os)
        fields.setdefault("os", OS_VALUES[-1])
        sb = FakeSandbox(id=random_id(13), create_date=now_iso(), **fields)
        sb.boot_logs.append("Sandbox starting...")
        sb.set_status("STARTING", "created")
        self.server.sandboxes[sb.id] = sb
        sb.boot_task = asyncio.create_task(self.server.boot.boot(sb))
        return web.json_response(self.server.views.sandbox(sb), status=201)

    async def get_sandbox(self, request: web.Request) -> web.Response:
        return web.json_response(self.server.views.sandbox(self.server.sandbox(request)))

    async def update_sandbox(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        body = await json_object(request)
        if sb.status != "RUNNING" or sb.setup_status == "INPROGRESS" or sb.busy is not None:
            raise ApiError(400, IN_PROGRESS)
        check_patch(body)
        self._check_identifier(body.get("identifier"), sb)
        if "first_boot_commands" in body and body["first_boot_commands"] != sb.first_boot_commands:
            sb.setup_status = "STALE"  # applied only by a recreate
        for key in PATCHABLE:
            if key in body:  # null clears the field
                empty: Any = [] if isinstance(getattr(sb, key), list) else None
                setattr(sb, key, empty if body[key] is None else body[key])
        if body.get("apps"):  # {id?, command} on update
            sb.apps = [_app(app["command"]) | _id_of(app) for app in body["apps"]]
        return web.json_response(self.server.views.sandbox(sb))

    async def delete_sandbox(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        self.server.forget(sb)
        await self.server.teardown(sb)
        return web.Response(status=204)

    def _check_identifier(self, identifier: str | None, own: FakeSandbox | None) -> None:
        if identifier is None:
            return
        check_identifier_shape(identifier)
        taken = (
            sb.identifier == identifier for sb in self.server.sandboxes.values() if sb is not own
        )
        if any(taken):
            raise ApiError(400, "'identifier' must be unique")


def _app(command: str) -> dict[str, Any]:
    return {"id": random_id(7), "command": command, "app_status": "NONE"}


def _id_of(app: dict[str, Any]) -> dict[str, Any]:
    return {"id": app["id"]} if isinstance(app.get("id"), str) else {}
