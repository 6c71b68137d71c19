"""The Buddy backend's kernel transport, with nothing that reaches into the sandbox over
the network: the kernel is a long-running tracked command listening on a FIFO in the
sandbox (`scripts.kernel_script`), and each cell is a sync exec that hands the cell over and
returns its frames as the command's own output (`scripts.cell_script`); a cell that runs
longer than one exec may last is read on by more (`scripts.resume_script`). An interrupt
is one more exec; a kill is a terminate of the kernel's command.

The FIFO lives in /buddy/work, because it is what every command sees: on the real service
any folder would do, but the fake Buddy of the tests runs each command in a container of
its own over the same work folder.
"""

from __future__ import annotations

import itertools
import secrets

from bot.errors import SandboxError
from bot.sandbox.base import WORK_DIR
from bot.sandbox.buddy.commands import COMMAND_MAX_S, BuddyCommands
from bot.sandbox.buddy.scripts import cell_script, interrupt_script, kernel_script, resume_script
from bot.sandbox.kernel.frames import Cell, CellOutput, FrameReader, KernelExit, crash_detail
from bot.sandbox.output import CappedBuffer, last_line

KERNEL_ROOT = f"{WORK_DIR}/.cache/kernel"  # one folder per kernel; a new one clears the rest
START_WAIT_S = 10.0  # how long the first cell waits for a kernel just started
EXIT_WAIT_S = 5.0  # how long a kernel's command may take to read as finished
SCRIPT_STDERR_BYTES = 4096


async def start_kernel(commands: BuddyCommands, *, network: bool, hand_off_s: float) -> BuddyKernel:
    """Start a kernel (the command returns at once: the first cell waits for it). Without
    `network` it runs in a network namespace of its own, as every snippet does."""
    folder = f"{KERNEL_ROOT}/{secrets.token_hex(6)}"
    script = kernel_script(
        folder,
        output_bytes=commands.output_bytes,
        timeout_s=COMMAND_MAX_S,  # the default cap: a lower SANDBOX_COMMAND_MAX_S is not its
        network=network,
    )
    return BuddyKernel(commands, await commands.start(script), folder, hand_off_s)


class BuddyKernel:
    """A kernel in a Buddy sandbox: its command's id and its folder."""

    def __init__(
        self, commands: BuddyCommands, command_id: str, folder: str, hand_off_s: float
    ) -> None:
        self._commands = commands
        self._command_id = command_id
        self._folder = folder
        self._hand_off_s = hand_off_s
        self._wait_s = START_WAIT_S

    async def run(self, cell: Cell, output: CellOutput) -> None:
        """Each request is one sync exec, which Buddy ends at 60 s: it hands the cell over
        and returns its frames, and the kernel ends the stream after `hand_off_s` so that a
        longer cell goes on in another exec. A cell done within that is one request. An
        exec cannot be terminated, and need not be: interrupting or killing the cell ends
        its frames, and so the exec."""
        script = cell_script(self._folder, cell, wait_s=self._wait_s, hand_off_s=self._hand_off_s)
        errors = CappedBuffer(SCRIPT_STDERR_BYTES)
        for hand_offs in itertools.count(1):
            output.handed_off = False
            stdout, stderr = await self._commands.exec(script, "running a Python cell")
            FrameReader(output).write(stdout.encode("utf-8", "surrogateescape"))
            errors.write(stderr.encode("utf-8", "surrogateescape"))
            if output.finished or not output.handed_off:
                break
            script = resume_script(self._folder, cell, hand_offs, hand_off_s=self._hand_off_s)
        if output.started:
            self._wait_s = 0.0  # it is up: later cells need not wait for it
        elif not output.absent and (problem := last_line(errors.output().text)):
            raise SandboxError(f"could not hand the code to the Python kernel: {problem}")

    async def interrupt(self) -> None:
        """Returns once the interrupt has been handed over, so the cell's grace starts then."""
        await self._commands.exec(interrupt_script(self._folder), "interrupting a Python cell")

    async def kill(self) -> None:
        await self._commands.kill(self._command_id)

    async def exit(self) -> KernelExit:
        await self._commands.wait_finished(self._command_id, limit_s=EXIT_WAIT_S)
        state = await self._commands.state(self._command_id)
        if state.running:  # it stopped answering but lives on
            await self._commands.kill(self._command_id)
            return KernelExit(None, why="it stopped answering, so it was stopped")
        return KernelExit(state.result.exit_code, crash_detail(state.result.stderr.text))
