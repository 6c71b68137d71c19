"""Local sandbox backend: every call runs in a fresh bubblewrap (`bwrap`) container.

A sandbox is a host folder (see `folders`) whose `work/` and `data/` are mounted at
/buddy/work and /buddy/data. Files persist between calls; processes do not, except
detached commands. Each call starts its own isolated, rlimited container (`bwrap`); the
optional repository is checked out by `git`.

File operations (upload, download, list) also run inside a sandbox, so symlinks that user
code planted in the work folder resolve inside the sandbox and never reach host files.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from bot.errors import SandboxError, SandboxUnavailable
from bot.sandbox.base import (
    FILE_SIZE_EXIT,
    INTERPRETERS,
    NOT_FOUND_EXIT,
    RUN_DIR,
    CommandState,
    ExecResult,
    ExecStatus,
    FileEntry,
    Language,
    SandboxInfo,
    SandboxSpec,
    destroyed,
    exit_status,
    not_installed,
    path_missing,
    sandbox_path,
    unsupported_language,
    upload_path,
    wrong_kind,
)
from bot.sandbox.limits import Limits
from bot.sandbox.local.bwrap import (
    Container,
    Launcher,
    check_reachable,
    kill_containers_of,
    resolve_interpreter,
)
from bot.sandbox.local.folders import ID_PREFIX, ID_RE, make_folders, remove_tree, tagged
from bot.sandbox.local.git import git_clone
from bot.sandbox.output import READ_CHUNK, CappedBuffer, last_line, pump

FILE_OP_TIMEOUT_S = 60.0  # listing, and the longest wait for the next chunk of a download
PIPE_GRACE_S = 5.0  # after exit, how long to wait for the output pipes to reach EOF
LIST_MAX_BYTES = 8 << 20
TOOL_STDERR_BYTES = 4096

# Pinned over the PATH lookup: not the bot's python (maybe in /usr/local): Debian's.
HOST_PROGRAMS = {"python": "/usr/bin/python3", "bash": "/bin/bash"}
SNIPPET_STEM = "main"  # the snippet file is /buddy/.run/main.<extension>

# Shell helpers for file operations; the path is always "$1", never part of the script.
UPLOAD_SH = 'mkdir -p -- "${1%/*}" && exec cat > "$1"'
DOWNLOAD_SH = '[ -e "$1" ] || exit 3; [ -f "$1" ] || exit 4; exec cat -- "$1"'
LIST_SH = (
    '[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 4; '
    'exec find "$1/" -mindepth 1 -maxdepth 1 -printf "%y %s %f\\0"'
)
EXIT_MISSING, EXIT_WRONG_KIND = 3, 4
FIND_KINDS: dict[bytes, Literal["file", "dir", "link"]] = {b"f": "file", b"d": "dir", b"l": "link"}


class LocalProvider:
    """Creates bubblewrap sandboxes whose folders live under `root`."""

    def __init__(
        self,
        root: Path,
        limits: Limits = Limits(),  # noqa: B008 - frozen dataclass, safe as a default
        *,
        sandbox_uid: int | None = None,
        allowed_git_protocols: tuple[str, ...] = ("https",),
        interpreters: Mapping[str, str] | None = None,
    ) -> None:
        self._launcher = Launcher(limits, sandbox_uid)
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        if self._launcher.uid is not None:
            check_reachable(self.root, self._launcher.uid)
        self.limits = limits
        self._git_protocols = allowed_git_protocols
        self._interpreters = {lang: i.program for lang, i in INTERPRETERS.items()}
        self._interpreters.update(HOST_PROGRAMS)
        self._interpreters.update(interpreters or {})
        self._sandboxes: dict[str, LocalSandbox] = {}
        self._probed = False
        self._closed = False

    async def create(self, spec: SandboxSpec) -> LocalSandbox:
        if self._closed:
            raise SandboxUnavailable("the local sandbox provider is closed")
        sandbox_id = ID_PREFIX + secrets.token_hex(6)
        home = self.root / sandbox_id
        sandbox = LocalSandbox(self, sandbox_id, home)
        self._sandboxes[sandbox_id] = sandbox
        try:
            await asyncio.to_thread(make_folders, home, spec, self._launcher.uid)
            await self._probe(home)
            if spec.repo_url:
                await git_clone(spec.repo_url, home / "data", self._git_protocols)
        except BaseException:
            await sandbox.destroy()
            raise
        return sandbox

    async def attach(self, sandbox_id: str) -> LocalSandbox | None:
        """A sandbox left by an earlier process: its folder is all there is to it."""
        if sandbox_id in self._sandboxes:
            return self._sandboxes[sandbox_id]
        home = self.root / sandbox_id
        if not ID_RE.fullmatch(sandbox_id) or not await asyncio.to_thread((home / "work").is_dir):
            return None
        await asyncio.to_thread(kill_containers_of, home)
        sandbox = self._sandboxes[sandbox_id] = LocalSandbox(self, sandbox_id, home)
        return sandbox

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        return await asyncio.to_thread(tagged, self.root, tag)

    async def destroy_id(self, sandbox_id: str) -> None:
        if not ID_RE.fullmatch(sandbox_id):
            raise SandboxError(f"{sandbox_id!r} is not a local sandbox id")
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None:
            await sandbox.destroy()
        else:  # left over from an earlier run
            await asyncio.to_thread(kill_containers_of, self.root / sandbox_id)
            await asyncio.to_thread(remove_tree, self.root / sandbox_id)

    async def close(self) -> None:
        """Stop every process of this provider's sandboxes; their folders stay."""
        self._closed = True
        await asyncio.gather(*(sb.stop_all() for sb in list(self._sandboxes.values())))

    # -- internals shared with LocalSandbox --

    def _forget(self, sandbox_id: str) -> None:
        self._sandboxes.pop(sandbox_id, None)

    async def _probe(self, home: Path) -> None:
        """Start one trivial sandbox so a host that cannot run bwrap fails at create time."""
        if self._probed:
            return
        container = await self._spawn(home, ["/bin/true"], stdout=asyncio.subprocess.DEVNULL)
        try:
            _, err = await container.proc.communicate()
        finally:
            container.close()
        if container.proc.returncode != 0:
            raise SandboxUnavailable(
                f"bubblewrap cannot start a sandbox on this host: {last_line(err)} "
                "(bubblewrap 0.8 or newer and unprivileged user namespaces are needed)"
            )
        self._probed = True

    def _program(self, language: str, code: str) -> tuple[list[str], dict[str, bytes]]:
        """The command to run a snippet, and the files to place in the sandbox for it."""
        if (problem := unsupported_language(language)) is not None:
            return _fail_command(problem), {}
        interpreter = resolve_interpreter(self._interpreters[language])
        if interpreter is None:
            return _fail_command(not_installed(language)), {}
        snippet = f"{RUN_DIR}/{SNIPPET_STEM}.{INTERPRETERS[language].extension}"
        return [interpreter, snippet], {snippet: code.encode("utf-8", errors="replace")}

    async def _spawn(
        self,
        home: Path,
        command: Sequence[str],
        *,
        files: Mapping[str, bytes] | None = None,
        stdin: int = asyncio.subprocess.DEVNULL,
        stdout: int = asyncio.subprocess.PIPE,
    ) -> Container:
        """Start `command` in a new bwrap container over `home`; stderr is always a pipe."""
        return await self._launcher.spawn(
            home / "work", home / "data", command, files=files, stdin=stdin, stdout=stdout
        )


class _Run:
    """A snippet's container with its stdout and stderr pumped into capped buffers."""

    def __init__(self, container: Container, output_bytes: int, max_s: float | None) -> None:
        self.container = container
        self.proc = container.proc
        self.stdout = CappedBuffer(output_bytes)
        self.stderr = CappedBuffer(output_bytes)
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stop_reason: ExecStatus | None = None
        self.done = asyncio.create_task(self._finish(max_s))

    async def _finish(self, max_s: float | None) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        pumps = asyncio.gather(
            pump(self.proc.stdout, self.stdout), pump(self.proc.stderr, self.stderr)
        )
        try:
            try:
                await asyncio.wait_for(self.proc.wait(), max_s)
            except TimeoutError:
                self.kill("timeout")
                await self.proc.wait()
            # Every process that could hold the pipes died with the PID namespace.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(pumps, PIPE_GRACE_S)
        finally:
            pumps.cancel()
            self.container.close()
            self.ended = time.monotonic()

    def kill(self, reason: ExecStatus) -> None:
        if self.proc.returncode is None:
            self.stop_reason = self.stop_reason or reason
            self.container.kill()

    def result(self) -> ExecResult:
        now = self.ended or time.monotonic()
        rc = self.proc.returncode if self.ended is not None else None
        status: ExecStatus = "ok"
        exit_code = rc
        if rc is not None and rc != 0 and self.stop_reason is not None:
            status, exit_code = self.stop_reason, None
        elif rc is not None and rc < 0:  # the launcher itself died of a signal
            status = "killed"
        elif rc is not None:
            status = exit_status(rc)
        return ExecResult(
            status, exit_code, self.stdout.output(), self.stderr.output(), now - self.started
        )

    def startup_error(self) -> str | None:
        """bwrap's own message if the container could not be set up."""
        text = self.stderr.output().text
        if self.proc.returncode == 1 and text.startswith("bwrap: "):
            return text.splitlines()[0]
        return None


class LocalSandbox:
    """One sandbox: a host folder plus the processes currently running over it."""

    def __init__(self, provider: LocalProvider, sandbox_id: str, home: Path) -> None:
        self.id = sandbox_id
        self._provider = provider
        self._home = home
        self._runs: set[_Run] = set()
        self._tools: set[Container] = set()
        self._commands: dict[str, _Run] = {}
        self._destroyed = False

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        run = await self._start(language, code, timeout_s)
        try:
            await asyncio.shield(run.done)
        except asyncio.CancelledError:
            run.kill("killed")
            raise
        if (message := run.startup_error()) is not None:
            raise SandboxError(f"the sandbox could not start: {message}")
        return run.result()

    async def start_command(self, language: Language, code: str) -> str:
        run = await self._start(language, code, self._provider.limits.command_max_s)
        command_id = "cmd-" + secrets.token_hex(4)
        self._commands[command_id] = run
        return command_id

    async def command_state(self, command_id: str) -> CommandState:
        run = self._command(command_id)
        return CommandState(command_id, running=not run.done.done(), result=run.result())

    async def kill_command(self, command_id: str) -> None:
        run = self._command(command_id)
        run.kill("killed")
        await asyncio.shield(run.done)

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        target = upload_path(path)
        written = 0
        async with self._tool(UPLOAD_SH, target, stdin=asyncio.subprocess.PIPE) as (proc, errors):
            assert proc.stdin is not None
            try:
                async for chunk in chunks:
                    proc.stdin.write(chunk)
                    written += len(chunk)
                    await proc.stdin.drain()  # back-pressure: never more than a pipe's worth held
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the writer died; its exit status says why
            rc = await proc.wait()
        if rc != 0:
            raise _file_error("write", path, rc, errors)
        return written

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
                    _read_at_most(proc.stdout, LIST_MAX_BYTES), FILE_OP_TIMEOUT_S
                )
            except TimeoutError:
                raise SandboxError(f"listing {path} took too long") from None
            if raw is None:
                raise SandboxError(f"{path} has too many entries to list")
            rc = await proc.wait()
        if rc != 0:
            raise _file_error("list", path, rc, errors, kind="folder")
        return _parse_listing(raw)

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        await self.stop_all()
        await asyncio.to_thread(remove_tree, self._home)
        self._provider._forget(self.id)

    async def stop_all(self) -> None:
        """Kill every process running over this sandbox and wait until they are gone."""
        for run in list(self._runs):
            run.kill("killed")
        for container in list(self._tools):
            container.kill()
        pending = [run.done for run in self._runs]
        if pending:
            await asyncio.wait(pending)

    # -- internals --

    def _check_alive(self) -> None:
        if self._destroyed:
            raise destroyed(self.id)

    def _command(self, command_id: str) -> _Run:
        self._check_alive()
        run = self._commands.get(command_id)
        if run is None:
            raise SandboxError(f"no such command {command_id!r} in sandbox {self.id}")
        return run

    async def _start(self, language: str, code: str, max_s: float | None) -> _Run:
        self._check_alive()
        command, files = self._provider._program(language, code)
        container = await self._provider._spawn(self._home, command, files=files)
        run = _Run(container, self._provider.limits.output_bytes, max_s)
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
        container = await self._provider._spawn(self._home, command, stdin=stdin, stdout=stdout)
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
            raise _file_error("read", path, rc, errors)


# -- helpers --


def _fail_command(message: str) -> list[str]:
    """A command that reports `message` like a shell would for a missing program."""
    script = f'printf "%s\\n" "$1" >&2; exit {NOT_FOUND_EXIT}'
    return ["/bin/sh", "-c", script, "sh", message]


async def _read_at_most(stream: asyncio.StreamReader, limit: int) -> bytes | None:
    """All of `stream`, or None once it exceeds `limit` bytes."""
    data = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        data += chunk
        if len(data) > limit:
            return None
    return bytes(data)


def _parse_listing(raw: bytes) -> list[FileEntry]:
    entries = []
    for record in raw.split(b"\0"):
        if record:
            kind, size, name = record.split(b" ", 2)
            name_text = name.decode("utf-8", "replace")
            entries.append(FileEntry(name_text, FIND_KINDS.get(kind, "other"), int(size)))
    return sorted(entries, key=lambda entry: entry.name)


def _file_error(
    action: str,
    path: str,
    rc: int,
    errors: CappedBuffer,
    *,
    kind: Literal["regular file", "folder"] = "regular file",
) -> SandboxError:
    if rc == EXIT_MISSING:
        return path_missing(path)
    if rc == EXIT_WRONG_KIND:
        return wrong_kind(path, kind)
    if rc == FILE_SIZE_EXIT:
        return SandboxError(f"could not {action} {path}: it exceeds the sandbox's file size limit")
    detail = last_line(errors.output().text) or f"exit code {rc}"
    return SandboxError(f"could not {action} {path}: {detail}")
