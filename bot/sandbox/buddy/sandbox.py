"""One Buddy sandbox, addressed by its id: code runs as tracked BASH commands whose JSONL
logs are streamed back (`commands`), Python in the sandbox's kernel, which is reached
through such commands too (`kernel`); files move through the content, upload and download
endpoints (`files`). Buddy answers 404 for a missing path or command and for a vanished
sandbox alike; `_guard` tells them apart. A sandbox Buddy stopped for inactivity is started
again (`wake`): by the session when it is next asked something, or here when a command is
refused because the sandbox is not running (a refused command did not run, so it is sent
again). Buddy counts a command's start as activity, not a process that goes on running, so
while a call runs the sandbox is kept active (`_kept_awake`), or a long cell would be
stopped mid-way.

File calls need a running sandbox (Buddy refuses them while it is STARTING, RESTORING or
STOPPED, §5.15): one refused as not running waits for the sandbox (`wake`) and is sent
again, unless its upload bytes were already on their way; an upload that may meet a sandbox
Buddy stopped meanwhile (no activity of ours for most of its `timeout`) wakes it first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar

from bot.errors import BotError, SandboxGone, SandboxPathError, SandboxUnavailable
from bot.sandbox.base import (
    CommandState,
    ExecResult,
    FileEntry,
    Language,
    destroyed,
    sandbox_path,
    upload_path,
)
from bot.sandbox.buddy.commands import BuddyCommands
from bot.sandbox.buddy.config import BuddyConfig
from bot.sandbox.buddy.errors import GONE_MESSAGE, CommandNotFound, NotRunning
from bot.sandbox.buddy.files import BuddyFiles
from bot.sandbox.buddy.http import BuddyHttp
from bot.sandbox.buddy.kernel import start_kernel
from bot.sandbox.buddy.power import Power
from bot.sandbox.buddy.scripts import run_script
from bot.sandbox.buddy.views import parse_listing
from bot.sandbox.kernel.runner import KernelProcess, KernelRunner

T = TypeVar("T")
log = logging.getLogger(__name__)
KEEP_AWAKE = {"command": "true", "runtime": "BASH"}  # a sync exec: not kept in the history
MAYBE_STOPPED_SHARE = 0.8  # of Buddy's inactivity timeout: past it, it may have stopped


class Owner(Protocol):
    """What a sandbox uses of the provider that made it (`BuddyProvider`)."""

    config: BuddyConfig
    http: BuddyHttp
    power: Power

    async def shielded(self, cleanup: Coroutine[Any, Any, None]) -> None: ...

    async def delete(self, sandbox_id: str) -> None: ...

    def forget(self, sandbox_id: str) -> None: ...


class BuddySandbox:
    """One Buddy sandbox, addressed by its id. `attached`: made by an earlier process, whose
    kernel (if any) is no longer this one's."""

    def __init__(self, provider: Owner, sandbox_id: str, *, attached: bool = False) -> None:
        self.id = sandbox_id
        self._provider = provider
        self._http = provider.http
        self._commands = BuddyCommands(
            provider.http,
            sandbox_id,
            shield=provider.shielded,
            poll_interval_s=provider.config.poll_interval_s,
            retry_base_delay_s=provider.config.retry_base_delay_s,
            output_bytes=provider.config.output_bytes,
            command_max_s=provider.config.command_max_s,
        )
        self._files = BuddyFiles(
            provider.http, sandbox_id, retry_base_delay_s=provider.config.retry_base_delay_s
        )
        self._destroyed = False
        self._gone = False
        # when Buddy last saw activity of ours, as far as we know (attached: unknown)
        self._active_at = -float("inf") if attached else time.monotonic()
        self._waking = asyncio.Lock()
        self._kernel: KernelRunner | None = None
        if provider.config.python_kernel:
            self._kernel = KernelRunner(
                self._start_kernel,
                output_bytes=provider.config.output_bytes,
                fresh_first=attached,
                grace_s=provider.config.kernel_grace_s,
            )

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        return await self._awake(lambda: self._run_code(language, code, timeout_s))

    async def _run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        if language == "python" and self._kernel is not None:
            async with self._guard(), self._kept_awake():
                return await self._kernel.run(code, timeout_s)
        script = run_script(language, code, timeout_s, network=self._provider.config.network)
        async with self._guard(), self._kept_awake():
            command_id = await self._commands.start(script)
            self._active_at = time.monotonic()
            return await self._commands.collect(command_id, timeout_s)

    async def restart_kernel(self) -> None:
        if self._kernel is not None:
            async with self._guard():
                await self._kernel.restart()

    async def warm(self, imports: Sequence[str]) -> bool:
        kernel = self._kernel
        if kernel is None:
            return False

        async def warm() -> bool:
            async with self._guard(), self._kept_awake():
                return await kernel.warm(imports)

        return await self._awake(warm)

    async def start_command(self, language: Language, code: str) -> str:
        network = self._provider.config.network
        script = run_script(language, code, self._commands.command_max_s, network=network)

        async def start() -> str:
            async with self._guard():
                return await self._commands.start(script)

        return await self._awake(start)

    async def command_state(self, command_id: str, wait_s: float = 0.0) -> CommandState:
        async with self._guard():
            if wait_s > 0:
                async with self._kept_awake():  # waiting is no activity to Buddy
                    await self._commands.wait(command_id, wait_s)
            return await self._commands.state(command_id)

    async def kill_command(self, command_id: str) -> None:
        async with self._guard():
            await self._commands.kill(command_id)

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        target = upload_path(path)
        source = _Pristine(chunks)
        if self._maybe_stopped():
            await self.wake()  # the upload's bytes could not be sent twice

        async def upload() -> int:
            async with self._guard():
                return await self._files.upload(target, path, source)

        return await self._awake(upload, again=lambda: not source.started)

    def download(self, path: str) -> AsyncIterator[bytes]:
        target = sandbox_path(path)
        self._check_usable()
        return self._download(path, target)

    async def list_dir(self, path: str) -> list[FileEntry]:
        target = sandbox_path(path)

        async def contents() -> list[Any]:
            async with self._guard():
                return await self._files.contents(target, path)

        return parse_listing(await self._awake(contents), target, path)

    async def wake(self) -> bool:
        """Start the sandbox again if Buddy stopped it; True if it did (files kept,
        processes gone: the kernel's state is lost, and the next cell says so)."""
        self._check_usable()
        async with self._waking, self._guard():
            woke = await self._provider.power.wake(self.id)
        self._active_at = time.monotonic()  # a start is activity; so is being found running
        if woke and self._kernel is not None:
            self._kernel.forget(lost=True)
        return woke

    async def stop(self) -> None:
        """Stop the sandbox: its files stay, its processes end; `wake` starts it again."""
        self._check_usable()
        async with self._waking, self._guard():
            await self._provider.power.stop(self.id)
        if self._kernel is not None:
            self._kernel.forget(lost=True)

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        try:
            await self._provider.delete(self.id)
        except BaseException:
            self._destroyed = False  # still there: a later destroy may succeed
            raise
        if self._kernel is not None:
            self._kernel.forget()  # it went with the sandbox
        self._provider.forget(self.id)

    # -- internals --

    async def _awake(
        self, call: Callable[[], Awaitable[T]], again: Callable[[], bool] = lambda: True
    ) -> T:
        """`call`, sent once more after waiting for the sandbox (starting it if it was
        stopped) if it was refused as not running, and `again` says it can be resent."""
        try:
            return await call()
        except NotRunning:
            if not again() or not await self.wake():
                raise  # it runs after all: the refusal was about something else
        return await call()

    def _maybe_stopped(self) -> bool:
        """Whether Buddy may have stopped the sandbox for inactivity since we last saw it."""
        idle = time.monotonic() - self._active_at
        return idle >= self._provider.config.timeout_s * MAYBE_STOPPED_SHARE

    @contextlib.asynccontextmanager
    async def _kept_awake(self) -> AsyncIterator[None]:
        """Run a trivial command every third of Buddy's inactivity timeout meanwhile."""
        task = asyncio.create_task(self._keep_awake(self._provider.config.timeout_s / 3))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _keep_awake(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            try:
                await self._http.request(
                    "POST",
                    self._http.sandbox_url(self.id, "exec"),
                    json=KEEP_AWAKE,
                    scope="sandbox",
                    what="keeping the sandbox active",
                    timing="command",
                )
                self._active_at = time.monotonic()
            except BotError as exc:  # the call itself will tell what is wrong
                log.info("could not keep sandbox %s active: %s", self.id, exc)

    async def _start_kernel(self) -> KernelProcess:
        config = self._provider.config
        return await start_kernel(
            self._commands, network=config.network, hand_off_s=config.cell_hand_off_s
        )

    def _check_usable(self) -> None:
        if self._destroyed:
            raise destroyed(self.id)
        if self._gone:
            raise SandboxGone(GONE_MESSAGE)
        if self._http.closed:
            raise SandboxUnavailable("the Buddy sandbox provider is closed")

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Check the sandbox is usable; tell a missing path or command from a vanished
        sandbox (Buddy answers 404 for both), and remember a vanished one."""
        self._check_usable()
        try:
            yield
        except SandboxGone:
            self._gone = True
            raise
        except (CommandNotFound, SandboxPathError):
            if await self._vanished():
                self._gone = True
                raise SandboxGone(GONE_MESSAGE) from None
            raise

    async def _vanished(self) -> bool:
        try:
            await self._http.request(
                "GET",
                self._http.sandbox_url(self.id),
                scope="sandbox",
                what="checking the sandbox",
                idempotent=True,
            )
        except SandboxGone:
            return True
        except BotError:
            return False  # cannot tell: the original error stands
        return False

    async def _download(self, path: str, target: str) -> AsyncIterator[bytes]:
        """The file's bytes; refused as not running before the first, it waits and retries."""
        sent = False
        try:
            async with self._guard():
                async for chunk in self._files.download(target, path):
                    sent = True
                    yield chunk
            return
        except NotRunning:
            if sent or not await self.wake():
                raise
        async with self._guard():
            async for chunk in self._files.download(target, path):
                yield chunk


class _Pristine:
    """Upload chunks that tell whether reading them has begun (then they cannot be resent)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self.started = False

    def __aiter__(self) -> _Pristine:
        return self

    async def __anext__(self) -> bytes:
        self.started = True
        return await anext(self._chunks)
