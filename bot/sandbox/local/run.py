"""One snippet's container, its output pumped into capped buffers, and its result."""

from __future__ import annotations

import asyncio
import contextlib
import time

from bot.sandbox.base import ExecResult, ExecStatus, exit_status
from bot.sandbox.local.bwrap import Container
from bot.sandbox.local.cpu import CpuWatch
from bot.sandbox.output import CappedBuffer, pump

PIPE_GRACE_S = 5.0  # after exit, how long to wait for the output pipes to reach EOF


class Run:
    """A snippet's container with its stdout and stderr pumped into capped buffers."""

    def __init__(
        self,
        container: Container,
        output_bytes: int,
        max_s: float | None,
        cpu: tuple[CpuWatch, float] | None = None,
    ) -> None:
        """`cpu`: the watch that stops the container once all its processes together have
        used the given CPU seconds."""
        self.container = container
        self.proc = container.proc
        self.stdout = CappedBuffer(output_bytes)
        self.stderr = CappedBuffer(output_bytes)
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stop_reason: ExecStatus | None = None
        self.note = ""  # told to the model with the result
        self.watcher: asyncio.Task[None] | None = None  # keeps a detached run under the quota
        self.done = asyncio.create_task(self._finish(max_s))
        if cpu is not None:
            watch, limit_s = cpu
            budget = watch.watch(self.proc.pid, limit_s, lambda: self._cpu_spent(limit_s))
            self.done.add_done_callback(lambda _: watch.unwatch(budget))

    def _cpu_spent(self, limit_s: float) -> None:
        if self.proc.returncode is None:
            self.note = (
                f"It was stopped: its processes together used more than {limit_s:.0f} s of "
                "CPU time, the most one call or detached command may use."
            )
            self.kill("killed")

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
            status,
            exit_code,
            self.stdout.output(),
            self.stderr.output(),
            now - self.started,
            note=self.note,
        )

    def startup_error(self) -> str | None:
        """bwrap's own message if the container could not be set up."""
        text = self.stderr.output().text
        if self.proc.returncode == 1 and text.startswith("bwrap: "):
            return text.splitlines()[0]
        return None
