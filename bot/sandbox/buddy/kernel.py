"""The Buddy backend's kernel transport, with nothing that reaches into the sandbox over
the network: the kernel is a long-running tracked command listening on a FIFO in the
sandbox (`scripts.kernel_script`), and each cell is a short tracked command that hands the
cell over and streams its frames back as the command's own output (`scripts.cell_script`),
which Buddy's log carries to the bot. An interrupt is one more short command; a kill is a
terminate of the kernel's command.

The FIFO lives in /buddy/work, because it is what every command sees: on the real service
any folder would do, but the fake Buddy of the tests runs each command in a container of
its own over the same work folder.
"""

from __future__ import annotations

import asyncio
import secrets

from bot.errors import SandboxError
from bot.sandbox.base import WORK_DIR
from bot.sandbox.buddy.commands import COMMAND_MAX_S, BuddyCommands
from bot.sandbox.buddy.scripts import cell_script, interrupt_script, kernel_script
from bot.sandbox.buddy.wire import LogParser
from bot.sandbox.kernel.frames import Cell, CellOutput, FrameReader, KernelExit, crash_detail
from bot.sandbox.output import CappedBuffer, last_line

KERNEL_ROOT = f"{WORK_DIR}/.cache/kernel"  # one folder per kernel; a new one clears the rest
START_WAIT_S = 10.0  # how long the first cell waits for a kernel just started
EXIT_WAIT_S = 5.0  # how long a kernel's command may take to read as finished
INTERRUPT_WAIT_S = 10.0  # how long to wait for the interrupt to be handed over
SCRIPT_STDERR_BYTES = 4096
EXEC_CELL_MAX_S = 45.0  # a cell this long at most (grace included) is one sync exec


async def start_kernel(commands: BuddyCommands, *, network: bool) -> BuddyKernel:
    """Start a kernel (the command returns at once: the first cell waits for it). Without
    `network` it runs in a network namespace of its own, as every snippet does."""
    folder = f"{KERNEL_ROOT}/{secrets.token_hex(6)}"
    script = kernel_script(
        folder,
        output_bytes=commands.output_bytes,
        timeout_s=COMMAND_MAX_S,  # the default cap: a lower SANDBOX_COMMAND_MAX_S is not its
        network=network,
    )
    return BuddyKernel(commands, await commands.start(script), folder)


class BuddyKernel:
    """A kernel in a Buddy sandbox: its command's id and its folder."""

    def __init__(self, commands: BuddyCommands, command_id: str, folder: str) -> None:
        self._commands = commands
        self._command_id = command_id
        self._folder = folder
        self._wait_s = START_WAIT_S

    async def run(self, cell: Cell, output: CellOutput) -> None:
        """A cell whose limit fits well within Buddy's 60 s for a sync exec is one request:
        the exec hands it over and returns its frames. A longer one is a tracked command
        whose followed log carries them (two requests). An exec cannot be terminated, but
        it needs no terminating: interrupting or killing the cell ends its frames, and so
        the exec."""
        script = cell_script(self._folder, cell, wait_s=self._wait_s)
        errors = CappedBuffer(SCRIPT_STDERR_BYTES)
        if cell.limit_s is not None and cell.limit_s + self._wait_s <= EXEC_CELL_MAX_S:
            stdout, stderr = await self._commands.exec(script, "running a Python cell")
            FrameReader(output).write(stdout.encode("utf-8", "surrogateescape"))
            errors.write(stderr.encode("utf-8", "surrogateescape"))
        else:
            command_id = await self._commands.start(script)
            try:
                await self._follow(command_id, output, errors)
            except asyncio.CancelledError:
                await self._commands.shield(self._commands.terminate_quietly(command_id))
                raise
        if output.started:
            self._wait_s = 0.0  # it is up: later cells need not wait for it
        elif not output.absent and (problem := last_line(errors.output().text)):
            raise SandboxError(f"could not hand the code to the Python kernel: {problem}")

    async def interrupt(self) -> None:
        """Returns once the interrupt has been handed over, so the cell's grace starts then
        (a command may take a while to start)."""
        command_id = await self._commands.start(interrupt_script(self._folder))
        await self._commands.wait_finished(command_id, limit_s=INTERRUPT_WAIT_S)

    async def kill(self) -> None:
        await self._commands.kill(self._command_id)

    async def exit(self) -> KernelExit:
        await self._commands.wait_finished(self._command_id, limit_s=EXIT_WAIT_S)
        state = await self._commands.state(self._command_id)
        if state.running:  # it stopped answering but lives on
            await self._commands.kill(self._command_id)
            return KernelExit(None, "it stopped answering")
        return KernelExit(state.result.exit_code, crash_detail(state.result.stderr.text))

    async def _follow(self, command_id: str, output: CellOutput, errors: CappedBuffer) -> None:
        """Stream the cell command's log into `output`; if the stream broke before the cell
        was done, read the whole stored log again once the command has finished."""
        parser = LogParser(FrameReader(output), errors)
        if await self._commands.read_logs(command_id, parser, follow=True) or output.finished:
            return
        await self._commands.wait_finished(command_id)
        output.reset()
        parser = LogParser(FrameReader(output), CappedBuffer(SCRIPT_STDERR_BYTES))
        await self._commands.read_logs(command_id, parser, follow=False)
