"""A sandbox's Python kernel as both backends run it: started on first use, one cell at a
time, interrupted at the time limit (or when the call is cancelled) and killed if it does
not stop, replaced when it dies. Only the transport (`KernelProcess`) is the backend's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol

from bot.errors import BotError, SandboxUnavailable
from bot.sandbox.base import ExecResult, ExecStatus, KernelEvent
from bot.sandbox.kernel.frames import Cell, CellOutput, KernelExit
from bot.sandbox.limits import KERNEL_GRACE_S

log = logging.getLogger(__name__)

Stop = Literal["interrupted", "restarted"]

WARM_LIMIT_S = 120.0


def warm_cell(imports: Sequence[str]) -> str:
    """A cell that imports `imports` (what the model's first cell almost always needs) while
    the model still thinks: bound to no name the model can see; one missing is skipped."""
    names = ", ".join(repr(name) for name in imports)
    return (
        "def _bot_warm():\n"
        "    import importlib\n"
        f"    for name in [{names}]:\n"
        "        try:\n"
        "            importlib.import_module(name)\n"
        "        except Exception:\n"
        "            pass\n"
        "_bot_warm()\n"
        "del _bot_warm\n"
    )


class KernelProcess(Protocol):
    """One running kernel, as a backend reaches it."""

    async def run(self, cell: Cell, output: CellOutput) -> None:
        """Send the cell and feed its frames into `output` until they end: with the done
        frame, or because the kernel can send no more (it ended, or was never there)."""
        ...

    async def interrupt(self) -> None:
        """Ask for a KeyboardInterrupt in the running cell."""
        ...

    async def kill(self) -> None:
        """End the kernel process now, whatever it is doing."""
        ...

    async def exit(self) -> KernelExit:
        """How the kernel ended (asked once `run` returned without a done frame)."""
        ...


StartKernel = Callable[[], Awaitable[KernelProcess]]


class KernelRunner:
    """The kernel of one sandbox. `fresh_first` says an earlier kernel may have held state
    (a sandbox attached after a restart of the bot), so the model is told it is gone;
    `grace_s` is how long an interrupted cell has to return before the kernel is killed."""

    def __init__(
        self,
        start: StartKernel,
        *,
        output_bytes: int,
        fresh_first: bool = False,
        grace_s: float = KERNEL_GRACE_S,
    ) -> None:
        self._start = start
        self._output_bytes = output_bytes
        self._grace_s = grace_s
        self._process: KernelProcess | None = None
        self._stale = fresh_first  # state was lost since the model last had a kernel
        self._event: KernelEvent = "started"
        self._warmed: KernelEvent | None = None  # a warmed kernel's news, for its first cell
        self._lock = asyncio.Lock()
        self._cleanups: set[asyncio.Task[Stop | None]] = set()

    async def run(self, code: str, timeout_s: float) -> ExecResult:
        """Run one cell; cells wait for each other. Cancelling the call interrupts the cell
        (and kills the kernel if it does not stop), then the cancellation goes on."""
        async with self._lock:
            started = time.monotonic()
            result = await self._attempt(code, timeout_s, started)
            if result is None:  # the kernel had ended before it took the cell
                result = await self._attempt(code, timeout_s, started)
            assert result is not None, "a kernel just started always gives a result"
            return result

    async def warm(self, imports: Sequence[str]) -> bool:
        """Start the kernel and make `imports` now, ahead of the first cell, which still
        hears that its kernel is new. True if the kernel is up (or was already)."""
        async with self._lock:
            if self._process is not None:
                return True
            process = await self._ensure()
            output = CellOutput(self._output_bytes)
            cell = Cell(secrets.token_hex(6), warm_cell(imports))
            stop = await self._run(process, cell, output, WARM_LIMIT_S)
            if stop is None and output.done is not None:
                self._warmed = self._event
                return True
            await self._drop(process)  # the first cell starts one as if never warmed
            return False

    async def restart(self) -> None:
        """Kill the kernel on request; the next cell starts a fresh one without a note."""
        async with self._lock:
            await self._drop()
            self._stale = False

    async def close(self) -> None:
        """Kill the kernel (the sandbox is going away, or the bot is)."""
        await self._drop()

    def forget(self, *, lost: bool = False) -> None:
        """The kernel's process ended with the sandbox's: it was destroyed, or (`lost`)
        stopped and started again, so the next cell's result says the state is gone."""
        self._process = None
        self._stale = self._stale or lost

    # -- internals --

    async def _attempt(self, code: str, timeout_s: float, started: float) -> ExecResult | None:
        new = self._process is None
        process = await self._ensure()
        output = CellOutput(self._output_bytes)
        stop = await self._run(process, Cell(secrets.token_hex(6), code), output, timeout_s)
        took = time.monotonic() - started
        if output.started:
            self._stale = False  # this result tells the model whatever it has to know
        if stop is not None:
            self._stale = stop == "restarted"
            return output.result("timeout", None, took, stop)
        if output.done is not None:
            exit_code = output.exit_code
            status: ExecStatus = "ok" if exit_code == 0 else "error"
            return output.result(status, exit_code, took, self._event)
        ended = await self._ended(process)
        if output.started:
            self._stale = True
            return output.result(ended.status, ended.exit_code, took, "died", ended.describe())
        if new:  # it never came up: say why, as a failed run
            output.stderr.write((ended.detail or ended.describe()).encode() + b"\n")
            return output.result("error", ended.exit_code, took, "started")
        self._stale = True  # it died between cells
        return None

    async def _ensure(self) -> KernelProcess:
        if self._process is None:
            self._process = await self._started()
            self._event, self._warmed = ("fresh" if self._stale else "started"), None
        else:
            self._event, self._warmed = self._warmed or "kept", None
        return self._process

    async def _started(self) -> KernelProcess:
        """A new kernel. A caller cancelled while it starts (a sandbox closed as its kernel
        warms) waits for it to be up and kills it: it must not live on unknown, writing
        into a sandbox that is being removed."""
        starting = asyncio.ensure_future(self._start())
        try:
            return await asyncio.shield(starting)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await (await starting).kill()
            raise

    async def _run(
        self, process: KernelProcess, cell: Cell, output: CellOutput, timeout_s: float
    ) -> Stop | None:
        """Run the cell within `timeout_s`: None if it finished (or the kernel ended),
        else how it was stopped."""
        task = asyncio.create_task(process.run(cell, output))
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout_s)
            return None
        except TimeoutError:
            return await self._stop(process, task, output)
        except asyncio.CancelledError:
            cleanup = asyncio.create_task(self._stop(process, task, output))
            self._cleanups.add(cleanup)
            cleanup.add_done_callback(self._cleanups.discard)
            await asyncio.shield(cleanup)  # a second cancellation leaves it running
            raise
        except BotError:  # the transport failed: the cell may still run, so stop it
            with contextlib.suppress(BotError):
                await process.interrupt()
            raise

    async def _stop(
        self, process: KernelProcess, task: asyncio.Task[None], output: CellOutput
    ) -> Stop | None:
        """Interrupt the cell; kill the kernel if the cell has not returned in time."""
        if task.done() and output.finished:
            return None
        try:
            await process.interrupt()
            await asyncio.wait_for(asyncio.shield(task), self._grace_s)
        except (TimeoutError, BotError) as exc:
            log.info("a kernel cell did not stop when interrupted: %r", exc)
        if output.done is not None:
            return "interrupted"
        await self._drop(process)
        self._stale = True  # said in this cell's result, unless the call was cancelled
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return "restarted"

    async def _ended(self, process: KernelProcess) -> KernelExit:
        """How a kernel that stopped sending ended; it is killed in case it still lives."""
        try:
            ended = await process.exit()
        except SandboxUnavailable:  # the sandbox itself is gone: that is the news
            self._process = None
            raise
        except BotError as exc:
            ended = KernelExit(None, str(exc))
        await self._drop(process)
        return ended

    async def _drop(self, process: KernelProcess | None = None) -> None:
        """Kill `process` (the current kernel by default); forget it if it is current. A
        clean-up left running by a second cancellation must not kill a newer kernel."""
        process = process or self._process
        if process is self._process:
            self._process = None
        if process is not None:
            try:
                await process.kill()
            except BotError as exc:
                log.warning("could not kill a kernel: %s", exc)
