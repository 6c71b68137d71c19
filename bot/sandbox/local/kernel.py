"""The local backend's kernel transport: one long-lived bubblewrap container per sandbox,
with the mounts, environment and limits of any other container (CPU time excepted, which
the kernel grants each cell afresh: RLIMIT_CPU would otherwise count its whole life).
That per-cell soft limit is the cell's to raise, so the bot also watches the container's
CPU time from outside (`cpu`): a cell, with whatever it started (threads, children, work
left running after it returned), that spends more than its budget plus a grace before the
next cell gets the whole kernel killed.
Requests go to the container's stdin and frames come from its stdout; its stderr keeps
what the kernel could not send as frames (a fatal error, say).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable

from bot.errors import SandboxError
from bot.sandbox.base import KILL_EXIT, OUT_DIR, RUN_DIR
from bot.sandbox.kernel.frames import (
    INTERRUPT,
    KERNEL_FILES,
    KERNEL_MAIN,
    Cell,
    CellOutput,
    FrameReader,
    KernelExit,
    channel_caps,
    crash_detail,
    run_request,
)
from bot.sandbox.limits import Limits
from bot.sandbox.local.bwrap import Container
from bot.sandbox.local.cpu import Budget, CpuWatch
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


async def start_kernel(
    spawn: Spawn, python: str, limits: Limits, cpu_watch: CpuWatch | None = None
) -> LocalKernel:
    command, files = kernel_command(python, limits)
    container = await spawn(
        command,
        files=files,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cpu_limit=False,
    )
    cpu = (cpu_watch, limits.cpu_budget_s) if cpu_watch is not None else None
    return LocalKernel(container, output_bytes=limits.output_bytes, cpu=cpu)


class LocalKernel:
    """A kernel in its own container, reached through the container's pipes; killed when
    a cell spends more than its CPU budget (`cpu`: the watch, and the budget in seconds)."""

    def __init__(
        self,
        container: Container,
        *,
        output_bytes: int = 1 << 20,
        cpu: tuple[CpuWatch, float] | None = None,
    ) -> None:
        proc = container.proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._container = container
        self._proc = proc
        self._stdin, self._stdout = proc.stdin, proc.stdout
        self._frames = FrameReader()
        self._caps = channel_caps(output_bytes)
        self.flooded = False  # killed for sending more than a cell may on the channel
        self._errors = CappedBuffer(STDERR_BYTES)
        self._err_pump = asyncio.create_task(pump(proc.stderr, self._errors))
        self.cpu_spent = False  # killed for spending more than a cell's CPU budget
        self._cpu_budget_s = cpu[1] if cpu is not None else None
        self._cpu: tuple[CpuWatch, Budget] | None = None
        if cpu is not None:  # counted from each cell's start: starting up is not its to pay
            budget = cpu[0].watch(proc.pid, cpu[1], self._cpu_spent, counting=False)
            self._cpu = (cpu[0], budget)

    async def run(self, cell: Cell, output: CellOutput) -> None:
        self._frames.output = output
        if self._cpu is not None:
            await self._cpu[0].restart(self._cpu[1])
        try:
            self._stdin.write(run_request(cell))
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return  # the kernel has ended; `exit` says how
        received, self._frames.lines = 0, 0
        while not output.finished:
            chunk = await self._stdout.read(READ_CHUNK)
            if not chunk:
                return
            received += len(chunk)
            if received > self._caps[0] or self._frames.lines > self._caps[1]:
                self.flooded = True  # cell code writing to the channel: not the kernel
                self._container.kill()
                while await self._stdout.read(READ_CHUNK):
                    pass  # what was under way, unread, to the end of the pipe
                return
            # Parsing is the costly part of a flood: a thread, so the loop keeps serving.
            await asyncio.to_thread(self._frames.write, chunk)

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
        if self.flooded:
            mb = self._caps[0] / 1e6
            why = f"it was killed: the cell flooded the kernel's channel (over {mb:.0f} MB)"
            return KernelExit(KILL_EXIT, why=why)
        if self.cpu_spent:
            detail = f"a cell may use {self._cpu_budget_s:.0f} s of CPU time"
            return KernelExit(128 + signal.SIGXCPU, detail)
        return KernelExit(rc if rc >= 0 else 128 - rc, crash_detail(message))

    def _cpu_spent(self) -> None:
        """The running (or last) cell, with all it started, passed its CPU budget."""
        self.cpu_spent = True
        self._container.kill()

    async def _close(self) -> None:
        if self._cpu is not None:
            self._cpu[0].unwatch(self._cpu[1])
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._err_pump), 1.0)
        self._err_pump.cancel()
        self._container.close()
