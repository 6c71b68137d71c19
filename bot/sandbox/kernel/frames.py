"""The bot's side of the kernel protocol (described in `sci_kernel`): the files that make
up the kernel, the requests sent to it, and the frames that come back, collected into one
cell's output with the same caps as any other run's output."""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.sandbox.base import KILL_EXIT, ExecResult, ExecStatus, KernelEvent
from bot.sandbox.output import CappedBuffer

HERE = Path(__file__).parent / "inside"
KERNEL_MAIN = "sci_kernel.py"
# The kernel program, copied into the sandbox next to each other (the main file imports
# the others from its own folder).
KERNEL_FILES: dict[str, bytes] = {
    name: (HERE / name).read_bytes()
    for name in (
        KERNEL_MAIN,
        "sci_kernel_output.py",
        "sci_kernel_cells.py",
        "sci_kernel_charts.py",
        "sci_kernel_chart_kinds.py",
        "sci_kernel_chart_axes.py",
    )
}
INTERRUPT = b'{"op": "interrupt"}\n'
MAX_FRAME_BYTES = 1 << 20  # the kernel sends at most 32 KiB of output per frame
MESSAGE_CHARS = 200
# What an honest kernel sends for one cell, at most: each stream's captured output (head
# and tail) as JSON (up to 6 bytes per byte: \udcXX escapes) in frames of any size down
# to one byte (about 25 bytes of frame each). Cell code can write to the channel too.
CHANNEL_FACTOR, CHANNEL_SLACK = 32, 1 << 20


def channel_caps(output_bytes: int) -> tuple[int, int]:
    """(bytes, frames) one cell may send on the kernel's channel before it counts as a
    flood."""
    return CHANNEL_FACTOR * 2 * output_bytes + CHANNEL_SLACK, output_bytes + 1024


@dataclass(frozen=True)
class Cell:
    id: str
    code: str


def run_request(
    cell: Cell, *, file: str | None = None, out: str | None = None, more_s: float = 0.0
) -> bytes:
    """A run request: the code inline, or the path of a file that holds it; `out` names
    the FIFO the cell's frames go to (else they come on the kernel's own channel), whose
    reader is handed off every `more_s` seconds (0: never)."""
    request: dict[str, Any] = {"op": "run", "id": cell.id}
    if file is None:
        request["code"] = cell.code
    else:
        request["file"] = file
    if out is not None:
        request["out"] = out
    if more_s > 0:
        request["more"] = more_s
    return (json.dumps(request) + "\n").encode()


class CellOutput:
    """One cell's frames: its output, capped, and how it ended. `absent` means the kernel
    was not there to take the cell (said by the Buddy backend's cell script)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.reset()

    def reset(self) -> None:
        self.stdout = CappedBuffer(self._limit)
        self.stderr = CappedBuffer(self._limit)
        self.started = False
        self.done: dict[str, Any] | None = None
        self.absent = False
        self.handed_off = False  # the last reader was handed off: the cell has more frames

    @property
    def finished(self) -> bool:
        return self.done is not None or self.absent

    def frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("t")
        if kind in ("o", "e"):
            data = str(frame.get("d", "")).encode("utf-8", "surrogateescape")
            (self.stdout if kind == "o" else self.stderr).write(data)
        elif kind == "start":
            self.started = True
        elif kind == "done":
            self.done = frame
            cut = frame.get("cut")
            if isinstance(cut, list) and len(cut) == 2:
                self.stdout.skip(_count(cut[0]))
                self.stderr.skip(_count(cut[1]))
        elif kind == "absent":
            self.absent = True
        elif kind == "more":
            self.handed_off = True

    @property
    def exit_code(self) -> int:
        """The done frame's exit code (1 if it has none that makes sense)."""
        code = (self.done or {}).get("code", 1)
        return code if isinstance(code, int) and not isinstance(code, bool) else 1

    def result(
        self,
        status: ExecStatus,
        exit_code: int | None,
        duration_s: float,
        kernel: KernelEvent,
        note: str = "",
    ) -> ExecResult:
        return ExecResult(
            status,
            exit_code,
            self.stdout.output(),
            self.stderr.output(),
            duration_s,
            kernel=kernel,
            kernel_note=note,
        )


class FrameReader:
    """Splits a stream of frames (JSON lines) and hands each to the current cell's output.
    Lines that are not frames are skipped. Also a sink for a command log's stdout."""

    def __init__(self, output: CellOutput | None = None) -> None:
        self.output = output
        self._pending = bytearray()
        self.lines = 0  # lines seen (the local kernel caps them per cell)

    def write(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._pending += data[start:end]
            self.lines += 1
            self._line(bytes(self._pending))
            self._pending.clear()
            start = end + 1
        self._pending += data[start:]
        if len(self._pending) > MAX_FRAME_BYTES:
            self._pending.clear()  # not a frame: the kernel never sends lines this long

    def skip(self, n: int) -> None:
        """Bytes a log reader had to drop: the frame they belonged to is lost anyway."""

    def _line(self, line: bytes) -> None:
        try:
            frame = json.loads(line)
        except ValueError:
            return
        if isinstance(frame, dict) and self.output is not None:
            self.output.frame(frame)


@dataclass(frozen=True)
class KernelExit:
    """How a kernel process ended: its exit code (None when it was killed without one) and
    the last line it wrote to its own stderr (a fatal error, say)."""

    exit_code: int | None
    detail: str = ""
    why: str = ""  # what the bot knows killed it, said instead of a guess from the code

    @property
    def status(self) -> ExecStatus:
        if self.exit_code is None or self.exit_code in (KILL_EXIT, 128 + signal.SIGXCPU):
            return "killed"
        return "error"

    def describe(self) -> str:
        code = self.exit_code
        if self.why:
            text = self.why
        elif code is None or code == KILL_EXIT:
            text = "it was killed (SIGKILL), most likely because it ran out of memory"
        elif code == 128 + signal.SIGSEGV:
            text = "it crashed (segmentation fault)"
        elif code == 128 + signal.SIGXCPU:
            text = "it used up its CPU time limit"
        elif code > 128:
            text = f"it was killed by {_signal_name(code - 128)}"
        else:
            text = f"it exited with code {code}"
        return f"{text}: {self.detail}" if self.detail else text


def crash_detail(stderr: str) -> str:
    """The gist of what a kernel wrote to its own stderr as it died: Python's fatal error and
    the cell line it was on, else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    fatal = next((line for line in lines if line.startswith("Fatal Python error")), None)
    if fatal is None:
        return lines[-1][:MESSAGE_CHARS] if lines else ""
    where = next((line for line in lines if line.startswith('File "<cell-')), None)
    return f"{fatal} ({where})" if where else fatal


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
