"""The fake Buddy's file routes (§5.15): listing, folders, multipart uploads and downloads
(a folder as tar.gz), all done by processes in the sandbox's VM."""

from __future__ import annotations

import contextlib
import posixpath
import secrets
import shlex
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING

from aiohttp import BodyPartReader, web

from tests.fakes.buddy.state import (
    DATA_DIR,
    FILE_OP_TIMEOUT_S,
    INVALID_URL,
    PATH_NOT_FOUND,
    VIRTUAL_DIRS,
    WORK_DIR,
    ApiError,
)
from tests.fakes.buddy.vm import Vm, VmError

if TYPE_CHECKING:
    from tests.fakes.buddy.api import FakeBuddy

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
# name, type letter (d: folder) and size of each entry, NUL-terminated
LIST_SH = "exec find {path} -mindepth 1 -maxdepth 1 -printf '%f\\0%y\\0%s\\0'"


class Files:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server

    def add_routes(self, router: web.UrlDispatcher, one: str) -> None:
        router.add_post(f"{one}/content/upload/{{path:.*}}", self.upload)  # before content/
        router.add_get(f"{one}/content/{{path:.*}}", self.list_content)
        router.add_post(f"{one}/content/{{path:.*}}", self.make_dir)
        router.add_get(f"{one}/download/{{path:.*}}", self.download)

    async def list_content(self, request: web.Request) -> web.Response:
        sb, vm = self.server.running(request)
        views = self.server.views
        path = sandbox_path(request)
        found = await stat(vm, path)
        if found is None:
            raise ApiError(400, PATH_NOT_FOUND)
        kind, size = found
        if path in VIRTUAL_DIRS:
            items = [views.item(sb, child, "DIR") for child in VIRTUAL_DIRS[path]]
        elif kind == "DIR":
            entries = await list_dir(vm, path)
            items = [views.entry_item(sb, path, *entry) for entry in entries]
        else:
            items = [views.item(sb, path, "FILE") | {"size": size}]  # a file: itself
        view = views.item(sb, path, "DIR")
        return web.json_response(
            {"url": view["url"], "html_url": view["html_url"], "contents": items}
        )

    async def make_dir(self, request: web.Request) -> web.Response:
        sb, vm = self.server.running(request)
        path = sandbox_path(request)
        if path in VIRTUAL_DIRS or path in (WORK_DIR, DATA_DIR):
            raise ApiError(409, f"{path} already exists")
        result = await vm.run(MKDIR_SH.format(path=shlex.quote(path)), FILE_OP_TIMEOUT_S)
        if result.exit_code == EXIT_EXISTS:
            raise ApiError(409, f"{path} already exists")
        if result.exit_code == EXIT_NO_PARENT:
            raise ApiError(400, PATH_NOT_FOUND)
        if result.exit_code != 0:
            raise ApiError(400, result.stderr.strip() or f"Cannot create {path}")
        return web.json_response(self.server.views.item(sb, path, "DIR"), status=201)

    async def upload(self, request: web.Request) -> web.Response:
        sb, vm = self.server.running(request)
        path = sandbox_path(request)
        if request.content_type != "multipart/form-data":
            raise ApiError(400, "Expected a multipart/form-data body with one part named 'file'")
        parent = await stat(vm, posixpath.dirname(path))
        if path in VIRTUAL_DIRS or parent is None or parent[0] != "DIR":
            raise ApiError(400, PATH_NOT_FOUND)  # the parent folder must exist
        if (found := await stat(vm, path)) is not None and found[0] == "DIR":
            raise ApiError(400, f"{path} is a directory")
        reader = await request.multipart()
        part = await reader.next()
        if not isinstance(part, BodyPartReader) or part.name != "file":
            raise ApiError(400, "The multipart body must have one part named 'file'")
        try:
            size = await vm.write(path, _part_chunks(part))
        except VmError as err:
            raise ApiError(400, str(err)) from None
        if await reader.next() is not None:
            await vm.run(f"rm -f -- {shlex.quote(path)}", FILE_OP_TIMEOUT_S)
            raise ApiError(400, "The multipart body must have exactly one part")
        item = self.server.views.item(sb, path, "FILE") | {"size": size}
        return web.json_response(item, status=201)

    async def download(self, request: web.Request) -> web.StreamResponse:
        _, vm = self.server.running(request)
        path = sandbox_path(request)
        found = await stat(vm, path)
        if found is None or path in VIRTUAL_DIRS:
            raise ApiError(400, PATH_NOT_FOUND)
        if found[0] == "DIR":
            return await self._download_dir(request, vm, path)
        return await send(request, vm.read(path), posixpath.basename(path))

    async def _download_dir(self, request: web.Request, vm: Vm, path: str) -> web.StreamResponse:
        """A folder comes back as a tar.gz archive, built in the sandbox and then removed."""
        name = f".buddy-download-{secrets.token_hex(6)}.tar.gz"
        archive = f"{WORK_DIR}/{name}"
        script = f"tar -czf {archive} --exclude=./{name} -C {shlex.quote(path)} ."
        try:
            result = await vm.run(script, FILE_OP_TIMEOUT_S)
            if result.exit_code != 0:
                raise ApiError(400, f"Cannot archive {path}: {result.stderr.strip()}")
            filename = f"{posixpath.basename(path)}.tar.gz"
            return await send(request, vm.read(archive), filename, "application/gzip")
        finally:
            with contextlib.suppress(VmError):  # gone with its sandbox
                await vm.run(f"rm -f -- {archive}", FILE_OP_TIMEOUT_S)


def sandbox_path(request: web.Request) -> str:
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


async def stat(vm: Vm, path: str) -> tuple[str, int] | None:
    """("DIR", 0) or ("FILE", size), or None when `path` does not exist."""
    if path in VIRTUAL_DIRS:
        return ("DIR", 0)
    result = await vm.run(STAT_SH.format(path=shlex.quote(path)), FILE_OP_TIMEOUT_S)
    match result.stdout.split():
        case ["DIR"]:
            return ("DIR", 0)
        case ["FILE", size]:
            return ("FILE", int(size))
    return None


async def list_dir(vm: Vm, path: str) -> list[tuple[str, str, int]]:
    """(name, "DIR" or "FILE", size) of a folder's entries, sorted by name; the API knows
    FILE and DIR only, so links and others are FILE."""
    result = await vm.run(LIST_SH.format(path=shlex.quote(path)), FILE_OP_TIMEOUT_S)
    if result.exit_code != 0:
        raise ApiError(400, PATH_NOT_FOUND)
    fields = result.stdout.split("\0")[:-1]
    entries = [
        (name, "DIR" if kind == "d" else "FILE", int(size))
        for name, kind, size in zip(fields[::3], fields[1::3], fields[2::3], strict=True)
    ]
    return sorted(entries)


async def _part_chunks(part: BodyPartReader) -> AsyncIterator[bytes]:
    while chunk := await part.read_chunk(64 * 1024):
        yield chunk


async def send(
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
