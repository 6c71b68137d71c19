"""The fake Buddy's command routes (§5.9-§5.14): tracked commands run for real in the
sandbox's VM, their JSONL logs (stored or followed), sync exec."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes.buddy.bodies import command_body, int_query, json_object
from tests.fakes.buddy.state import (
    NOT_RUNNING,
    POLL_S,
    ApiError,
    FakeCommand,
    FakeSandbox,
    now_iso,
    random_id,
    settle,
)
from tests.fakes.buddy.vm import Process, result_of

if TYPE_CHECKING:
    from tests.fakes.buddy.api import FakeBuddy

JSONL = "application/jsonl"


class Commands:
    def __init__(self, server: FakeBuddy) -> None:
        self.server = server

    def add_routes(self, router: web.UrlDispatcher, one: str) -> None:
        command = f"{one}/commands/{{cid}}"
        router.add_get(f"{one}/commands", self.list_commands)
        router.add_post(f"{one}/commands", self.run_command)
        router.add_post(f"{one}/exec", self.exec_command)
        router.add_get(command, self.get_command)
        router.add_get(f"{command}/logs", self.command_logs)
        router.add_post(f"{command}/terminate", self.terminate_command)

    async def run_command(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        command, runtime = command_body(await json_object(request))
        if request.query.get("fast") == "true":
            return web.json_response(await self._exec(sb, command, runtime))
        await sb.ready.wait()  # held while the sandbox boots (§5.9)
        if sb.gone:
            raise ApiError(404, "Sandbox not found")
        if sb.status != "RUNNING" or sb.vm is None:
            raise ApiError(400, NOT_RUNNING)
        sb.last_spawn = time.monotonic()
        sb.touch()
        process = await sb.vm.start(runtime, command)
        cmd = FakeCommand(random_id(9), command, runtime, process, now_iso())
        sb.commands[cmd.id] = cmd
        watcher = asyncio.create_task(self._watch(cmd))
        sb.watchers.add(watcher)
        watcher.add_done_callback(sb.watchers.discard)
        return web.json_response(self.server.views.command(sb, cmd))

    async def exec_command(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        command, runtime = command_body(await json_object(request))
        return web.json_response(await self._exec(sb, command, runtime))

    async def _exec(self, sb: FakeSandbox, command: str, runtime: str) -> dict[str, Any]:
        """Run to completion; past the ceiling answer 400 and leave the process running."""
        if sb.status != "RUNNING" or sb.vm is None:
            raise ApiError(400, NOT_RUNNING)
        sb.last_spawn = time.monotonic()
        sb.touch()
        process = await sb.vm.start(runtime, command)
        limit = self.server.exec_timeout_s
        try:
            async with asyncio.timeout(limit):
                await process.done.wait()
        except TimeoutError:
            raise ApiError(
                400, f"Command did not finish on instance {sb.id} within {limit:g}s"
            ) from None
        result = result_of(process)
        return {
            "command": command,
            "runtime": runtime,
            "exit_code": result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
        }

    async def _watch(self, cmd: FakeCommand) -> None:
        """Flip the command's status once its process has ended (and the lag has passed)."""
        await cmd.process.done.wait()
        cmd.hold_status(self.server.status_lag_s)
        while True:  # a log stream that ends meanwhile pushes flip_at back
            wait = cmd.flip_at - time.monotonic()
            if wait <= 0:
                break
            await asyncio.sleep(wait)
        cmd.finish(result_of(cmd.process).exit_code)

    async def list_commands(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        limit = int_query(request, "limit", 50, 1, 200)
        commands = list(reversed(sb.commands.values()))  # newest first
        if cursor := request.query.get("cursor"):
            ids = [c.id for c in commands]
            if cursor not in ids:
                raise ApiError(400, f"Invalid cursor {cursor!r}")
            commands = commands[ids.index(cursor) + 1 :]
        views = [self.server.views.command(sb, c) for c in commands[:limit]]
        url = f"{self.server.views.sandbox_url(sb)}/commands"
        return web.json_response({"url": url, "commands": views})

    async def get_command(self, request: web.Request) -> web.Response:
        sb, cmd = self._command(request)
        return web.json_response(self.server.views.command(sb, cmd))

    async def terminate_command(self, request: web.Request) -> web.Response:
        sb, cmd = self._command(request)
        await settle(cmd.started)
        cmd.process.kill()  # a no-op once it has ended
        await cmd.process.done.wait()
        return web.json_response(self.server.views.command(sb, cmd))

    async def command_logs(self, request: web.Request) -> web.StreamResponse:
        _, cmd = self._command(request)
        if request.query.get("follow") == "true":
            return await self._follow(request, cmd)
        body = LogCursor(cmd.process).take()
        return web.Response(body=body, headers={"Content-Type": JSONL})

    async def _follow(self, request: web.Request, cmd: FakeCommand) -> web.StreamResponse:
        """Stream new complete lines as they appear; flush the rest and close at the end
        (when its process ends, or with its sandbox)."""
        response = web.StreamResponse(headers={"Content-Type": JSONL})
        await response.prepare(request)
        cursor = LogCursor(cmd.process)
        try:
            while True:
                final = not cmd.process.running
                if chunk := cursor.take():
                    await response.write(chunk)
                if final:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(cmd.process.done.wait(), POLL_S)
            cmd.hold_status(self.server.status_lag_s)
            await response.write_eof()
        except ConnectionError:
            pass  # the client left (a wait that ended before the command)
        return response

    def _command(self, request: web.Request) -> tuple[FakeSandbox, FakeCommand]:
        sb = self.server.sandbox(request)
        cmd = sb.commands.get(request.match_info["cid"])
        if cmd is None:
            raise ApiError(404, "Command not found")
        return sb, cmd


class LogCursor:
    """A process's new complete lines as JSONL, stdout's first, each line once."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.out, self.err = LineCursor(), LineCursor()

    def take(self) -> bytes:
        final = not self.process.running
        body = jsonl("STDOUT", self.out.take(self.process.stdout, final))
        return body + jsonl("STDERR", self.err.take(self.process.stderr, final))


class LineCursor:
    """Hands out the complete new lines of a growing captured stream, once each."""

    def __init__(self) -> None:
        self.sent = 0  # bytes of the stream already handed out

    def take(self, data: bytearray, final: bool) -> list[str]:
        new = bytes(data[self.sent :])
        end = len(new) if final else new.rfind(b"\n") + 1
        self.sent += end
        lines = new[:end].decode(errors="replace").split("\n")
        if lines[-1] == "":
            lines.pop()  # the text ended with a newline (or there was nothing new)
        return lines


def jsonl(kind: str, lines: list[str]) -> bytes:
    records = (json.dumps({"type": kind, "data": line}, ensure_ascii=False) for line in lines)
    return "".join(record + "\n" for record in records).encode()
