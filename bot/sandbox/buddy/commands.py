"""Tracked BASH commands in one Buddy sandbox: start, follow the JSONL log, read the final
status, terminate.

Why tracked commands (`POST …/commands`): the synchronous `/exec` endpoint gives up after
60 s, cannot be killed and streams nothing; the non-BASH runtimes give no control over the
working directory or environment. One BASH command carries the wrapper of
`scripts.run_script`, so a run costs one POST, one followed log stream and usually
one status read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import quote

from bot.errors import BotError, SandboxError, SandboxUnavailable
from bot.sandbox.base import CommandState, ExecResult, ExecStatus
from bot.sandbox.buddy.errors import CommandNotFound, OutcomeUnknown, StreamInterrupted
from bot.sandbox.buddy.http import BuddyHttp
from bot.sandbox.buddy.views import FINISHED, exec_status, exit_code_of, parse_timestamp
from bot.sandbox.buddy.wire import LogParser
from bot.sandbox.limits import Limits
from bot.sandbox.output import CappedBuffer

log = logging.getLogger(__name__)

OUTPUT_LIMIT = Limits().output_bytes  # per stream, the default every backend keeps
COMMAND_MAX_S = Limits().command_max_s  # wall-clock cap of a detached command
CLIENT_GRACE_S = 15.0  # past the snippet's limit before the client terminates it itself
FINISH_PATIENCE_S = 5.0  # a log stream ended this long before the status did: re-read it
KILL_ATTEMPTS = 3  # a failed terminate leaves the process running, so it is retried
KILL_WAIT_S = 5.0
MAX_POLL_DELAY_S = 1.0
CLEANUP_TIMEOUT_S = 60.0

# Runs a clean-up to its end even if the caller is being cancelled.
Shield = Callable[[Coroutine[Any, Any, None]], Awaitable[None]]


class Capture:
    """A command's stdout and stderr, capped, fed from its JSONL log."""

    def __init__(self, output_bytes: int = OUTPUT_LIMIT) -> None:
        self.stdout = CappedBuffer(output_bytes)
        self.stderr = CappedBuffer(output_bytes)
        self.parser = LogParser(self.stdout, self.stderr)

    def result(self, status: ExecStatus, exit_code: int | None, duration_s: float) -> ExecResult:
        return ExecResult(status, exit_code, self.stdout.output(), self.stderr.output(), duration_s)


class BuddyCommands:
    """The commands of one sandbox. Errors are the HTTP layer's; telling a missing command
    from a vanished sandbox is left to the caller."""

    def __init__(
        self,
        http: BuddyHttp,
        sandbox_id: str,
        *,
        shield: Shield,
        poll_interval_s: float,
        retry_base_delay_s: float,
        output_bytes: int = OUTPUT_LIMIT,
        command_max_s: float = COMMAND_MAX_S,
    ) -> None:
        self._http = http
        self.output_bytes = output_bytes  # per stream kept
        self.command_max_s = command_max_s  # wall-clock cap of a detached command
        self._sandbox_id = sandbox_id
        self.shield = shield
        self._poll_interval_s = poll_interval_s
        self._retry_base_delay_s = retry_base_delay_s
        self._killed: set[str] = set()
        self._started: dict[str, float] = {}

    async def exec(self, script: str, what: str) -> tuple[str, str]:
        """Run a short BASH script to its end in one request (sync exec, §5.10; Buddy ends
        one at 60 s): its stdout and stderr. Never resent: it may have run."""
        response = await self._http.request(
            "POST", self._http.sandbox_url(self._sandbox_id, "exec"),
            json={"command": script, "runtime": "BASH"},
            timing="command", scope="sandbox", what=what,
        )  # fmt: skip
        body = self._http.json_of(response, what)
        return str(body.get("stdout") or ""), str(body.get("stderr") or "")

    async def start(self, script: str) -> str:
        """Start a BASH command; its id. Never resent (it would run twice); a 429 is waited
        out, as a refused request did not run."""
        what = "starting a command"
        try:
            response = await self._http.request(
                "POST",
                self._url(),
                json={"command": script, "runtime": "BASH"},
                timing="command",
                scope="sandbox",
                what=what,
            )
            command_id = self._http.json_of(response, what).get("id")
        except OutcomeUnknown as exc:
            raise SandboxError(f"the command may or may not have run: {exc}") from None
        except asyncio.CancelledError:
            await self.shield(self._terminate_matching(script))
            raise
        if not isinstance(command_id, str) or not command_id:
            raise SandboxError("the command may or may not have run: Buddy did not give its id")
        self._started[command_id] = time.monotonic()
        return command_id

    async def collect(self, command_id: str, timeout_s: float) -> ExecResult:
        """Output and result of a run; past the limit plus a grace the client kills it."""
        capture = Capture(self.output_bytes)
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout_s + CLIENT_GRACE_S):
                view = await self._follow(command_id, capture)
        except TimeoutError:
            await self.terminate_quietly(command_id)
            return capture.result("timeout", None, time.monotonic() - started)
        except asyncio.CancelledError:
            await self.shield(self.terminate_quietly(command_id))
            raise
        except SandboxUnavailable:
            raise
        except BotError:
            await self.terminate_quietly(command_id)
            raise
        elapsed = time.monotonic() - started
        killed = command_id in self._killed
        status, code = exec_status(exit_code_of(view), elapsed, timeout_s, killed=killed)
        return capture.result(status, code, elapsed)

    async def state(self, command_id: str) -> CommandState:
        """Status first, then the log: a finished status means the log is complete."""
        view = await self._get(command_id)
        capture = Capture(self.output_bytes)
        await self.read_logs(command_id, capture.parser, follow=False)
        duration = self._duration(command_id, view)
        if view.get("status") not in FINISHED:
            return CommandState(command_id, True, capture.result("ok", None, duration))
        killed = command_id in self._killed
        status, code = exec_status(exit_code_of(view), duration, self.command_max_s, killed=killed)
        return CommandState(command_id, False, capture.result(status, code, duration))

    async def wait(self, command_id: str, wait_s: float) -> None:
        """Until the command ends or `wait_s` passes. Its followed log ends with it: one
        request for the whole wait, where polling would spend one every second."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await self.read_logs(command_id, Capture().parser, follow=True)
                await self.wait_finished(command_id)  # a broken stream: poll out the rest

    async def kill(self, command_id: str) -> None:
        view = await self._get(command_id)
        if view.get("status") in FINISHED:
            return
        self._killed.add(command_id)
        await self._terminate(command_id)
        await self.wait_finished(command_id, limit_s=KILL_WAIT_S)

    # -- internals --

    def _url(self, command_id: str | None = None, *parts: str) -> str:
        tail = [] if command_id is None else [quote(command_id, safe=""), *parts]
        return self._http.sandbox_url(self._sandbox_id, "commands", *tail)

    async def _follow(self, command_id: str, capture: Capture) -> dict[str, Any]:
        """Stream the log to its end, then read the final status. If the stream broke, or
        ended long before the status did, the stored log is read again from the start."""
        clean = await self.read_logs(command_id, capture.parser, follow=True)
        view, waited = await self.wait_finished(command_id)
        if not clean or waited > FINISH_PATIENCE_S:
            fresh = Capture()
            if await self.read_logs(command_id, fresh.parser, follow=False):
                capture.stdout, capture.stderr = fresh.stdout, fresh.stderr
        return view

    async def read_logs(self, command_id: str, parser: LogParser, *, follow: bool) -> bool:
        """Feed the command's log into `parser`; False if the stream broke off."""
        what = "reading the command's output"
        clean = True
        try:
            async with self._http.stream(
                self._url(command_id, "logs"),
                params={"follow": "true"} if follow else None,
                accept_type="application/jsonl",
                # a followed log is quiet while the code is; the stored log is not
                timing="stream" if follow else "default",
                scope="command",
                subject=command_id,
                what=what,
            ) as response:
                async for chunk in self._http.chunks(response, what):
                    parser.feed(chunk)
        except StreamInterrupted as exc:
            log.info("Buddy log stream of command %s broke: %s", command_id, exc)
            clean = False
        parser.close()
        return clean

    async def wait_finished(
        self, command_id: str, limit_s: float | None = None
    ) -> tuple[dict[str, Any], float]:
        """The command's view once finished (or after `limit_s`), and how long that took.
        Right after its log ends a command may still say INPROGRESS for a moment."""
        started = time.monotonic()
        delay = self._poll_interval_s
        while True:
            view = await self._get(command_id)
            waited = time.monotonic() - started
            if view.get("status") in FINISHED or (limit_s is not None and waited >= limit_s):
                return view, waited
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, MAX_POLL_DELAY_S)

    async def _get(self, command_id: str) -> dict[str, Any]:
        what = f"reading command {command_id}"
        response = await self._http.request(
            "GET",
            self._url(command_id),
            scope="command",
            subject=command_id,
            what=what,
            idempotent=True,
        )
        return self._http.json_of(response, what)

    async def _terminate(self, command_id: str) -> None:
        """POST terminate, up to KILL_ATTEMPTS times unless the command ended meanwhile."""
        failure: SandboxError | None = None
        for attempt in range(KILL_ATTEMPTS):
            try:
                await self._http.request(
                    "POST",
                    self._url(command_id, "terminate"),
                    scope="command",
                    subject=command_id,
                    what="stopping a command",
                )
                return
            except (SandboxUnavailable, CommandNotFound):
                raise
            except SandboxError as exc:
                failure = exc
            view = await self._get(command_id)
            if view.get("status") in FINISHED:
                return
            await asyncio.sleep(self._retry_base_delay_s * 2**attempt)
        raise SandboxError(f"could not stop command {command_id}; it may still run: {failure}")

    async def terminate_quietly(self, command_id: str) -> None:
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                await self._terminate(command_id)
        except (BotError, TimeoutError) as exc:
            log.warning("could not stop Buddy command %s: %s", command_id, exc)

    async def _terminate_matching(self, script: str) -> None:
        """After a cancelled POST: find the command by its (unique) text and stop it."""
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                response = await self._http.request(
                    "GET", self._url(), scope="sandbox", what="listing commands", idempotent=True
                )
                commands = self._http.json_of(response, "listing commands").get("commands")
                for item in commands or []:
                    if isinstance(item, dict) and item.get("command") == script:
                        await self._terminate(str(item.get("id")))
        except (BotError, TimeoutError) as exc:
            log.warning(
                "could not stop a cancelled command in sandbox %s: %s", self._sandbox_id, exc
            )

    def _duration(self, command_id: str, view: dict[str, Any]) -> float:
        start = parse_timestamp(view.get("start_date"))
        finish = parse_timestamp(view.get("finish_date"))
        if start is not None and finish is not None:
            return max(0.0, finish - start)
        if command_id in self._started:
            return time.monotonic() - self._started[command_id]
        return max(0.0, time.time() - start) if start is not None else 0.0
