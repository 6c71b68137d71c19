"""One local sandbox: its host folder plus the containers currently running over it.

Python snippets run in the sandbox's kernel, a long-lived container of its own (`kernel`).
Other snippets and detached commands each get a container (`run.Run`). Uploads, downloads
and listings run small shell helpers (`fileops`) in containers of their own, so symlinks
that user code planted in the work folder resolve inside the sandbox and never reach host
files.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

from bot.errors import SandboxError, SandboxGone
from bot.sandbox.base import (
    CommandState,
    ExecResult,
    FileEntry,
    Language,
    destroyed,
    sandbox_path,
    upload_path,
)
from bot.sandbox.kernel.runner import KernelProcess, KernelRunner
from bot.sandbox.local import cgroups
from bot.sandbox.local.bwrap import Container, Launcher
from bot.sandbox.local.fileops import (
    DOWNLOAD_SH,
    LIST_MAX_BYTES,
    LIST_SH,
    REMOVE_SH,
    UPLOAD_SH,
    file_error,
    parse_listing,
    read_at_most,
)
from bot.sandbox.local.folders import QUOTA_FOLDERS, make_scratch
from bot.sandbox.local.hostfs import remove_tree
from bot.sandbox.local.kernel import start_kernel
from bot.sandbox.local.programs import Programs
from bot.sandbox.local.quota import DiskQuota, Watch
from bot.sandbox.local.run import PIPE_GRACE_S, Run
from bot.sandbox.local.slots import Slots
from bot.sandbox.output import READ_CHUNK, CappedBuffer, pump
from bot.units import size_text

FILE_OP_TIMEOUT_S = 60.0  # listing, and the longest wait for the next chunk of a download
TOOL_STDERR_BYTES = 4096


class LocalSandbox:
    """One sandbox: a host folder plus the processes currently running over it."""

    def __init__(
        self,
        sandbox_id: str,
        home: Path,
        *,
        launcher: Launcher,
        programs: Programs,
        forget: Callable[[str], None],
        slots: Slots | None = None,
        python_kernel: bool = True,
        attached: bool = False,
    ) -> None:
        self.id = sandbox_id
        self._home = home
        self._launcher = launcher
        self._limits = launcher.limits
        self._programs = programs
        self._forget = forget  # tells the provider this sandbox is gone
        self._slots = slots  # taken by the provider for it; given back when stopped or gone
        self._runs: set[Run] = set()
        self._tools: set[Container] = set()
        self._commands: dict[str, Run] = {}
        self._destroyed = False
        self._stopped = False
        self.uid: int | None = launcher.uids if isinstance(launcher.uids, int) else None
        self.cgroup: Path | None = None  # its memory cgroup, if the host offers one
        self.cpu_cgroup: Path | None = None  # and its cpu cgroup
        folders = [home / name for name in QUOTA_FOLDERS]
        limits = self._limits
        self._quota = DiskQuota(folders, limits.disk_bytes, self.stop_all, limits.max_files)
        self._lifetimes: set[asyncio.Task[None]] = set()  # each container's hold on the quota
        self._kernel: KernelRunner | None = None
        if python_kernel:
            self._kernel = KernelRunner(
                self._start_kernel,
                output_bytes=self._limits.output_bytes,
                fresh_first=attached,
                grace_s=self._limits.kernel_grace_s,
            )

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        unseen, self._quota.unseen = self._quota.unseen, False
        async with self._quota.watching() as watch:
            result = await self._run_code(language, code, timeout_s)
        # stopped between calls (a thread a cell left writing, say): said even if this call
        # was stopped too (the writes of the killed processes may still have been landing)
        earlier = f"Since the last call: {self._quota.note()}" if unseen else ""
        if watch.fired:
            note = earlier or self._quota.note()
            return dataclasses.replace(result, status="killed", exit_code=None, note=note)
        if earlier:
            return dataclasses.replace(result, note=" ".join(filter(None, [earlier, result.note])))
        return result

    async def _run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        python = self._programs.interpreter("python") if language == "python" else None
        if python is not None and self._kernel is not None:
            self._check_alive()
            return await self._kernel.run(code, timeout_s)
        run = await self._start(language, code, timeout_s)
        try:
            await asyncio.shield(run.done)
        except asyncio.CancelledError:
            run.kill("killed")
            raise
        if (message := run.startup_error()) is not None:
            raise SandboxError(f"the sandbox could not start: {message}")
        return run.result()

    async def restart_kernel(self) -> None:
        self._check_alive()
        if self._kernel is not None:
            await self._kernel.restart()

    async def warm(self, imports: Sequence[str]) -> bool:
        self._check_alive()
        return self._kernel is not None and await self._kernel.warm(imports)

    async def start_command(self, language: Language, code: str) -> str:
        running = [run for run in self._commands.values() if not run.done.done()]
        if len(running) >= self._limits.max_commands:
            raise SandboxError(
                f"this sandbox already runs {len(running)} detached commands, the most it "
                "may run at once: wait for one to end (check_command) or kill one first"
            )
        run = await self._start(language, code, self._limits.command_max_s)
        command_id = "cmd-" + secrets.token_hex(4)
        self._commands[command_id] = run
        run.watcher = asyncio.create_task(self._watch_command(run))
        return command_id

    async def _watch_command(self, run: Run) -> None:
        """A detached command stays under the quota for as long as it runs."""
        async with self._quota.watching() as watch:
            await asyncio.shield(run.done)
        if watch.fired:
            run.note = self._quota.note()

    async def command_state(self, command_id: str, wait_s: float = 0.0) -> CommandState:
        run = self._command(command_id)
        if wait_s > 0 and not run.done.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(run.done), wait_s)
        return CommandState(command_id, running=not run.done.done(), result=run.result())

    async def kill_command(self, command_id: str) -> None:
        run = self._command(command_id)
        run.kill("killed")
        await asyncio.shield(run.done)

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        """Write a file from `chunks`; one that would pass the session's disk quota is
        refused and its part removed."""
        target = upload_path(path)
        written, room, fits = 0, await self._quota.room(), True
        async with self._tool(UPLOAD_SH, target, stdin=asyncio.subprocess.PIPE) as (proc, errors):
            assert proc.stdin is not None
            try:
                async for chunk in chunks:
                    if not (fits := written + len(chunk) <= room):
                        break  # the writer is killed on the way out
                    proc.stdin.write(chunk)
                    written += len(chunk)
                    await proc.stdin.drain()  # back-pressure: never more than a pipe's worth held
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the writer died; its exit status says why
            rc = await proc.wait() if fits else 0
        if not fits:
            await self._remove(target)
            raise SandboxError(self._too_big(path, room))
        if rc != 0:
            raise file_error("write", path, rc, errors)
        return written

    async def _remove(self, target: str) -> None:
        """Remove a file inside the sandbox: a link planted on its path resolves there, never
        to a host file."""
        async with self._tool(REMOVE_SH, target) as (proc, _):
            await proc.wait()

    def _too_big(self, path: str, room: int) -> str:
        limit, left = size_text(self._quota.limit), size_text(max(room, 0))
        return f"{path} does not fit in this session's disk quota of {limit} ({left} left)"

    def download(self, path: str) -> AsyncIterator[bytes]:
        target = sandbox_path(path)
        self._check_alive()
        return self._read_file(path, target)

    async def list_dir(self, path: str) -> list[FileEntry]:
        target = sandbox_path(path)
        async with self._tool(LIST_SH, target, stdout=asyncio.subprocess.PIPE) as (proc, errors):
            assert proc.stdout is not None
            try:
                raw = await asyncio.wait_for(
                    read_at_most(proc.stdout, LIST_MAX_BYTES), FILE_OP_TIMEOUT_S
                )
            except TimeoutError:
                raise SandboxError(f"listing {path} took too long") from None
            if raw is None:
                raise SandboxError(f"{path} has too many entries to list")
            rc = await proc.wait()
        if rc != 0:
            raise file_error("list", path, rc, errors, kind="folder")
        return parse_listing(raw)

    async def stop(self) -> None:
        """Kill every process; the folder stays. Nothing needs starting again here, but
        `wake` says once that the processes are gone."""
        self._check_alive()
        await self.stop_all()
        if self._kernel is not None:
            self._kernel.forget(lost=True)
        if not self._stopped:
            self._stopped = True
            self._give_back_slot()

    async def wake(self) -> bool:
        self._check_alive()
        if not await asyncio.to_thread((self._home / "work").is_dir):  # removed by another bot
            raise SandboxGone(f"sandbox {self.id} no longer exists")
        if self._stopped and self._slots is not None:
            await self._slots.take()
        woke, self._stopped = self._stopped, False
        return woke

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        try:
            await self.stop_all()
            await asyncio.to_thread(remove_tree, self._home)
            for cgroup in self.cgroups:
                await asyncio.to_thread(cgroups.remove, cgroup)
        finally:
            self._forget(self.id)
            if not self._stopped:
                self._give_back_slot()

    async def stop_all(self) -> None:
        """Kill every process running over this sandbox and wait until they are gone."""
        if self._kernel is not None:
            await self._kernel.close()
        for run in list(self._runs):
            run.kill("killed")
        for container in list(self._tools):
            container.kill()
        pending = [run.done for run in self._runs]
        if pending:
            await asyncio.wait(pending)

    @property
    def cgroups(self) -> list[Path]:
        """The cgroups its containers join (none where the host offers none)."""
        return [c for c in (self.cgroup, self.cpu_cgroup) if c is not None]

    # -- internals --

    def _give_back_slot(self) -> None:
        if self._slots is not None:
            self._slots.give_back()

    def _check_alive(self) -> None:
        if self._destroyed:
            raise destroyed(self.id)

    def _command(self, command_id: str) -> Run:
        self._check_alive()
        run = self._commands.get(command_id)
        if run is None:
            raise SandboxError(f"no such command {command_id!r} in sandbox {self.id}")
        return run

    async def _spawn(
        self,
        command: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.PIPE,
        cpu_limit: bool = True,
    ) -> Container:
        """Start `command` in a new container over this sandbox; stderr is always a pipe."""
        self._check_alive()
        name = secrets.token_hex(6)
        scratch = await asyncio.to_thread(make_scratch, self._home, name, self.uid)
        try:
            container = await self._launcher.spawn(
                self._home,
                scratch,
                command,
                files=files,
                stdin=stdin,
                stdout=stdout,
                cpu_limit=cpu_limit,
                uid=self.uid,
                cgroups=self.cgroups,
            )
        except BaseException:
            await asyncio.to_thread(remove_tree, scratch)
            raise
        lifetime = asyncio.create_task(self._lifetime(container, scratch, self._quota.hold()))
        self._lifetimes.add(lifetime)
        lifetime.add_done_callback(self._lifetimes.discard)
        return container

    async def _lifetime(self, container: Container, scratch: Path, watch: Watch) -> None:
        """The quota holds for as long as the container lives, calls or no calls; its
        scratch folder goes with it."""
        try:
            await container.proc.wait()
        finally:
            self._quota.release(watch)
            with contextlib.suppress(OSError):
                await asyncio.to_thread(remove_tree, scratch)

    async def _start_kernel(self) -> KernelProcess:
        python = self._programs.interpreter("python")
        assert python is not None, "checked before the kernel is asked for"
        return await start_kernel(self._spawn, python, self._limits, self._launcher.cpu_watch)

    async def _start(self, language: str, code: str, max_s: float | None) -> Run:
        self._check_alive()
        command, files = self._programs.command(language, code)
        container = await self._spawn(command, files=files)
        cpu = (self._launcher.cpu_watch, self._limits.cpu_budget_s)
        run = Run(container, self._limits.output_bytes, max_s, cpu)
        self._runs.add(run)
        run.done.add_done_callback(lambda _: self._runs.discard(run))
        return run

    @contextlib.asynccontextmanager
    async def _tool(
        self,
        script: str,
        target: str,
        *,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.DEVNULL,
    ) -> AsyncIterator[tuple[asyncio.subprocess.Process, CappedBuffer]]:
        """A file-operation helper process in its own sandbox, killed if left early."""
        self._check_alive()
        command = ["/bin/sh", "-c", script, "sh", target]
        container = await self._spawn(command, stdin=stdin, stdout=stdout)
        self._tools.add(container)
        errors = CappedBuffer(TOOL_STDERR_BYTES)
        assert container.proc.stderr is not None
        err_pump = asyncio.create_task(pump(container.proc.stderr, errors))
        try:
            yield container.proc, errors
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(err_pump), PIPE_GRACE_S)
        finally:
            self._tools.discard(container)
            container.kill()
            container.close()
            err_pump.cancel()

    async def _read_file(self, path: str, target: str) -> AsyncIterator[bytes]:
        async with self._tool(DOWNLOAD_SH, target, stdout=asyncio.subprocess.PIPE) as (
            proc,
            errors,
        ):
            assert proc.stdout is not None
            while True:
                try:
                    chunk = await asyncio.wait_for(proc.stdout.read(READ_CHUNK), FILE_OP_TIMEOUT_S)
                except TimeoutError:
                    raise SandboxError(f"reading {path} stalled") from None
                if not chunk:
                    break
                yield chunk
            rc = await proc.wait()
        if rc != 0:
            raise file_error("read", path, rc, errors)
