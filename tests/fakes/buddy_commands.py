"""The fake Buddy's command routes (§5.9-§5.14): tracked commands run for real in the
sandbox's local backing sandbox, their JSONL logs (stored or followed), sync exec."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bot.errors import SandboxError
from bot.sandbox.base import Language, Output
from bot.sandbox.local import LocalSandbox
from tests.fakes.buddy_bodies import command_body, int_query, json_object
from tests.fakes.buddy_state import (
    NOT_RUNNING,
    POLL_S,
    ApiError,
    FakeCommand,
    FakeSandbox,
    exit_code,
    now_iso,
    random_id,
    settle,
)

if TYPE_CHECKING:
    from tests.fakes.buddy_api import FakeBuddy

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
        command, runtime, language = command_body(await json_object(request))
        if request.query.get("fast") == "true":
            return web.json_response(await self._exec(sb, command, runtime, language))
        await sb.ready.wait()  # held while the sandbox boots (§5.9)
        if sb.gone:
            raise ApiError(404, "Sandbox not found")
        if sb.status != "RUNNING" or sb.local is None:
            raise ApiError(400, NOT_RUNNING)
        sb.last_spawn = time.monotonic()
        sb.touch()
        local_id = await sb.local.start_command(language, command)
        cmd = FakeCommand(random_id(9), command, runtime, local_id, now_iso())
        sb.commands[cmd.id] = cmd
        watcher = asyncio.create_task(self._watch(sb.local, cmd))
        sb.watchers.add(watcher)
        watcher.add_done_callback(sb.watchers.discard)
        return web.json_response(self.server.views.command(sb, cmd))

    async def exec_command(self, request: web.Request) -> web.Response:
        sb = self.server.sandbox(request)
        command, runtime, language = command_body(await json_object(request))
        return web.json_response(await self._exec(sb, command, runtime, language))

    async def _exec(
        self, sb: FakeSandbox, command: str, runtime: str, language: Language
    ) -> dict[str, Any]:
        """Run to completion; past the ceiling answer 400 and leave the process running."""
        if sb.status != "RUNNING" or sb.local is None:
            raise ApiError(400, NOT_RUNNING)
        sb.last_spawn = time.monotonic()
        sb.touch()
        local_id = await sb.local.start_command(language, command)
        limit = self.server.exec_timeout_s
        deadline = time.monotonic() + limit
        while (state := await sb.local.command_state(local_id)).running:
            if time.monotonic() >= deadline:
                raise ApiError(400, f"Command did not finish on instance {sb.id} within {limit:g}s")
            await asyncio.sleep(POLL_S)
        result = state.result
        return {
            "command": command,
            "runtime": runtime,
            "exit_code": exit_code(result),
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
            cmd.hold_status(self.server.status_lag_s)
            while True:  # a log stream that ends meanwhile pushes flip_at back
                wait = cmd.flip_at - time.monotonic()
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            cmd.finish(state.result)

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
        if sb.local is not None:
            await settle(cmd.started)
            await sb.local.kill_command(cmd.local_id)  # a no-op once it has ended
        return web.json_response(self.server.views.command(sb, cmd))

    async def command_logs(self, request: web.Request) -> web.StreamResponse:
        sb, cmd = self._command(request)
        assert sb.local is not None
        if request.query.get("follow") == "true":
            return await self._follow(request, sb.local, cmd)
        state = await sb.local.command_state(cmd.local_id)
        out, err = LineCursor(), LineCursor()
        final = not state.running
        body = jsonl("STDOUT", out.take(state.result.stdout, final))
        body += jsonl("STDERR", err.take(state.result.stderr, final))
        return web.Response(body=body, headers={"Content-Type": JSONL})

    async def _follow(
        self, request: web.Request, local: LocalSandbox, cmd: FakeCommand
    ) -> web.StreamResponse:
        """Stream new complete lines as they appear; flush the rest and close at the end."""
        response = web.StreamResponse(headers={"Content-Type": JSONL})
        await response.prepare(request)
        out, err = LineCursor(), LineCursor()
        try:
            while True:
                state = await local.command_state(cmd.local_id)
                final = not state.running
                chunk = jsonl("STDOUT", out.take(state.result.stdout, final))
                chunk += jsonl("STDERR", err.take(state.result.stderr, final))
                if chunk:
                    await response.write(chunk)
                if final:
                    break
                await asyncio.sleep(POLL_S)
        except SandboxError:
            pass  # the sandbox went away: the stream just ends
        except ConnectionError:
            return response  # the client left
        cmd.hold_status(self.server.status_lag_s)
        await response.write_eof()
        return response

    def _command(self, request: web.Request) -> tuple[FakeSandbox, FakeCommand]:
        sb = self.server.sandbox(request)
        cmd = sb.commands.get(request.match_info["cid"])
        if cmd is None:
            raise ApiError(404, "Command not found")
        return sb, cmd


class LineCursor:
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


def jsonl(kind: str, lines: list[str]) -> bytes:
    records = (json.dumps({"type": kind, "data": line}, ensure_ascii=False) for line in lines)
    return "".join(record + "\n" for record in records).encode()
