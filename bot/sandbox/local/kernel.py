"""The local backend's kernel transport: one long-lived bubblewrap container per sandbox,
with the mounts, environment and limits of any other container (CPU time excepted, which
the kernel grants each cell afresh: RLIMIT_CPU would otherwise count its whole life).
Requests go to the container's stdin and frames come from its stdout; its stderr keeps
what the kernel could not send as frames (a fatal error, say).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from bot.errors import SandboxError
from bot.sandbox.base import OUT_DIR, RUN_DIR
from bot.sandbox.kernel.frames import (
    INTERRUPT,
    KERNEL_FILES,
    KERNEL_MAIN,
    Cell,
    CellOutput,
    FrameReader,
    KernelExit,
    crash_detail,
    run_request,
)
from bot.sandbox.limits import Limits
from bot.sandbox.local.bwrap import Container
from bot.sandbox.output import READ_CHUNK, CappedBuffer, pump

STDERR_BYTES = 8192
EXIT_WAIT_S = 5.0  # after its output ended, how long the kernel may take to exit

# Starts a container over the sandbox: (command, files, stdin, stdout, cpu_limit).
Spawn = Callable[..., Awaitable[Container]]


def kernel_command(python: str, limits: Limits) -> tuple[list[str], dict[str, bytes]]:
    """The kernel's command line, and the files to place in the sandbox for it."""
    argv = [
        python,
        f"{RUN_DIR}/{KERNEL_MAIN}",
        *["--output-bytes", str(limits.output_bytes), "--cpu-s", str(limits.cpu_s)],
        *["--out-dir", OUT_DIR],
    ]
    return argv, {f"{RUN_DIR}/{name}": data for name, data in KERNEL_FILES.items()}


async def start_kernel(spawn: Spawn, python: str, limits: Limits) -> LocalKernel:
    command, files = kernel_command(python, limits)
    container = await spawn(
        command,
        files=files,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cpu_limit=False,
    )
    return LocalKernel(container)


class LocalKernel:
    """A kernel in its own container, reached through the container's pipes."""

    def __init__(self, container: Container) -> None:
        proc = container.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._container = container
        self._proc = proc
        self._stdin, self._stdout = proc.stdin, proc.stdout
        self._frames = FrameReader()
        self._errors = CappedBuffer(STDERR_BYTES)
        self._err_pump = asyncio.create_task(pump(proc.stderr, self._errors))

    async def run(self, cell: Cell, output: CellOutput) -> None:
        self._frames.output = output
        try:
            self._stdin.write(run_request(cell))
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return  # the kernel has ended; `exit` says how
        while not output.finished:
            chunk = await self._stdout.read(READ_CHUNK)
            if not chunk:
                return
            self._frames.write(chunk)

    async def interrupt(self) -> None:
        # No drain: a request is far smaller than the pipe, and `run` may be draining.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
            self._stdin.write(INTERRUPT)

    async def kill(self) -> None:
        self._container.kill()
        await self._proc.wait()
        await self._close()

    async def exit(self) -> KernelExit:
        try:
            rc = await asyncio.wait_for(self._proc.wait(), EXIT_WAIT_S)
        except TimeoutError:  # its output ended but it lives on: it counts as killed
            await self.kill()
            rc = -9
        await self._close()
        message = self._errors.output().text
        if rc == 1 and message.startswith("bwrap: "):
            raise SandboxError(f"the sandbox could not start: {message.splitlines()[0]}")
        return KernelExit(rc if rc >= 0 else 128 - rc, crash_detail(message))

    async def _close(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._err_pump), 1.0)
        self._err_pump.cancel()
        self._container.close()
