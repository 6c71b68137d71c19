"""The kernel's pieces without a sandbox: the frames carry output byte for byte and capped
as every backend caps it, deaths are described, and the tool tells the model what
happened to its kernel."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import threading
import time
from types import ModuleType
from typing import Any

import pytest

from bot.agent.tools import Toolbox
from bot.sandbox.base import ExecResult, KernelEvent, Output
from bot.sandbox.kernel.frames import CellOutput, FrameReader, KernelExit, crash_detail
from bot.sandbox.output import CappedBuffer
from tests.support import CHECKOUT


def _kernel_module(name: str) -> ModuleType:
    """One of the kernel's own modules, loaded from its file as the sandbox loads it."""
    path = CHECKOUT / "bot" / "sandbox" / "kernel" / "inside" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sci_kernel_output = _kernel_module("sci_kernel_output")


@pytest.mark.parametrize("limit", [0, 1, 100, 4096])
def test_frames_reproduce_the_bots_own_cap_byte_for_byte(limit: int) -> None:
    rng = random.Random(limit)
    data = "héllo wörld € ✓\n".encode() * 500 + bytes(rng.randrange(256) for _ in range(3000))
    frames: list[bytes] = []

    def send(chunk: bytes) -> None:
        frame = {"t": "o", "d": chunk.decode("utf-8", "surrogateescape")}
        frames.append(json.dumps(frame).encode() + b"\n")

    capped = sci_kernel_output.Capped(limit, send)
    position = 0
    while position < len(data):  # the pipe delivers arbitrary pieces
        step = rng.randrange(1, 700)
        capped.write(data[position : position + step])
        position += step
    cut = capped.finish()
    frames.append(b'{"t": "done", "id": "c", "code": 0, "cut": [%d, 0]}\n' % cut)

    output = CellOutput(limit)
    reader = FrameReader(output)
    stream = b"".join(frames)
    for start in range(0, len(stream), 1000):  # and the frames arrive in pieces too
        reader.write(stream[start : start + 1000])
    expected = CappedBuffer(limit)
    expected.write(data)
    assert output.stdout.output() == expected.output()
    assert output.done is not None and output.exit_code == 0


def test_frames_that_are_not_json_are_skipped() -> None:
    output = CellOutput(100)
    reader = FrameReader(output)
    reader.write(
        b'[... 10 bytes cut ...]\n{"t": "start", "id": "x"}\nnot json\n{"t": "o", "d": "hi"}\n'
    )
    assert output.started and output.stdout.output().text == "hi"
    assert not output.finished


@pytest.mark.parametrize(
    ("code", "said", "status"),
    [
        (None, "killed (SIGKILL), most likely because it ran out of memory", "killed"),
        (137, "killed (SIGKILL), most likely because it ran out of memory", "killed"),
        (139, "crashed (segmentation fault)", "error"),
        (152, "used up its CPU time limit", "killed"),
        (143, "killed by SIGTERM", "error"),
        (3, "exited with code 3", "error"),
    ],
)
def test_how_a_kernel_ended_is_described(code: int | None, said: str, status: str) -> None:
    ended = KernelExit(code)
    assert ended.describe() == f"it was {said}" or ended.describe() == f"it {said}"
    assert ended.status == status


def test_a_crash_is_summed_up_by_its_fatal_error_and_cell_line() -> None:
    stderr = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
        '  File "/usr/lib/python3/ctypes/__init__.py", line 519 in string_at\n'
        '  File "<cell-4>", line 2 in <module>\n'
        '  File "/buddy/.run/sci_kernel.py", line 90 in run\n'
    )
    assert crash_detail(stderr) == (
        'Fatal Python error: Segmentation fault (File "<cell-4>", line 2 in <module>)'
    )
    assert crash_detail("one\ntwo\n") == "two"
    assert crash_detail("") == ""


class KernelSandbox:
    """Just enough of a sandbox for the toolbox: each run_code returns the next result."""

    def __init__(self, results: list[ExecResult]) -> None:
        self.results = results
        self.restarts = 0

    async def run_code(self, language: str, code: str, timeout_s: float) -> ExecResult:
        return self.results.pop(0)

    async def restart_kernel(self) -> None:
        self.restarts += 1


def cell(kernel: KernelEvent, status: Any = "ok", stderr: str = "", note: str = "") -> ExecResult:
    code = 0 if status == "ok" else None if status in ("timeout", "killed") else 1
    return ExecResult(status, code, Output("out\n"), Output(stderr), 0.5, kernel, note)


async def tool_text(results: list[ExecResult], **call: Any) -> tuple[str, KernelSandbox]:
    sandbox = KernelSandbox(results)

    async def get() -> Any:
        return sandbox

    toolbox = Toolbox(get, default_timeout_s=5, max_timeout_s=10, output_chars=4000)
    outcome = await toolbox.call("run_code", {"language": "python", "code": "x", **call})
    return outcome.content, sandbox


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (cell("kept"), None),
        (cell("started"), None),
        (
            cell("fresh"),
            "fresh Python kernel: variables from earlier calls gone, files in /buddy/work kept",
        ),
        (cell("interrupted", "timeout"), "past its 5 s limit and was interrupted"),
        (cell("interrupted", "timeout"), "interrupted, state kept"),
        (
            cell("restarted", "timeout"),
            "kernel restarted, variables gone, files in /buddy/work kept",
        ),
        (cell("died", "killed", note="it was killed (SIGKILL)"), "kernel died (it was killed"),
        (cell("kept", "error", "MemoryError\n"), "out of memory (MemoryError) and the kernel kept"),
    ],
)
async def test_the_model_is_told_what_happened_to_its_kernel(
    result: ExecResult, said: str | None
) -> None:
    content, _ = await tool_text([result])
    if said is None:
        assert "kernel" not in content
    else:
        assert said in content
    assert "was killed." not in content  # the one-off process wording is not used


async def test_restart_on_request_restarts_then_runs() -> None:
    content, sandbox = await tool_text([cell("started")], restart=True)
    assert sandbox.restarts == 1
    assert content.startswith("The Python kernel was restarted as asked")
    assert "status: ok" in content


def _reader(path: str) -> tuple[threading.Thread, list[bytes]]:
    """A FIFO made at `path`, its reader started, and what it will have read."""
    os.mkfifo(path)
    read: list[bytes] = []

    def read_all() -> None:
        with open(path, "rb") as fifo:  # blocks until the kernel opens it
            read.append(fifo.read())

    thread = threading.Thread(target=read_all)
    thread.start()
    return thread, read


def test_a_cell_done_as_its_hand_off_falls_due_is_not_handed_off(tmp_path: Any) -> None:
    """The done frame goes out, the hand-off falls due before the cell is closed: no
    `more` may follow the done frame, or the kernel would wait for a reader the bot, which
    has the done frame, never sends."""
    path = str(tmp_path / "c.out")
    reader, read = _reader(path)
    frames = sci_kernel_output.Frames(None)
    frames.open_cell(path, every=0.05)
    frames.send({"t": "start", "id": "c"})
    frames.send({"t": "done", "id": "c", "code": 0})
    time.sleep(0.1)  # past the hand-off's time
    frames.tick()
    assert frames.held is None  # not handed off: close_cell need not wait for a reader
    frames.close_cell(path)
    reader.join(5)
    lines = [json.loads(line) for line in read[0].splitlines()]
    assert [line["t"] for line in lines] == ["start", "done"]


def test_frames_after_a_hand_off_go_to_the_next_reader_whole(tmp_path: Any) -> None:
    path = str(tmp_path / "c.out")
    reader, first = _reader(path)
    frames = sci_kernel_output.Frames(None)
    frames.open_cell(path, every=0.05)
    frames.send({"t": "o", "d": "before"})
    time.sleep(0.1)
    frames.tick()  # the hand-off: the first reader's stream ends
    reader.join(5)
    frames.send({"t": "o", "d": "held"})  # no reader yet: held
    reader, second = _reader(path + ".1")
    while frames.held is not None:
        frames.tick()
        time.sleep(0.005)
    frames.send({"t": "done", "id": "c"})
    frames.close_cell(path)
    reader.join(5)
    assert [json.loads(x)["t"] for x in first[0].splitlines()] == ["o", "more"]
    assert [json.loads(x) for x in second[0].splitlines()] == [
        {"t": "o", "d": "held"},
        {"t": "done", "id": "c"},
    ]
    assert not os.path.exists(path) and not os.path.exists(path + ".1")
