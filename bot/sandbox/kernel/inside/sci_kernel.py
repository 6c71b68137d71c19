"""The Python kernel: one long-lived interpreter in the sandbox that runs cells, as a
notebook does, so variables, imports and loaded data stay between calls.

This file and its helpers (`sci_kernel_output`, `sci_kernel_cells`, `sci_kernel_charts`)
are copied into the sandbox and run there by the sandbox's own python3: they import
nothing from the bot (the standard library only; matplotlib and numpy once the cell's code
has imported them) and run on Python 3.8 or newer. Each chart saved to a file gets a
`<stem>.chart.json` beside it, the chart's data (`sci_kernel_charts`).

The protocol is one JSON object per line. Requests:
  {"op": "run", "id": ID, "code": SOURCE}   (or "file": a file holding the source, which
                                             is removed once read; "out": a FIFO that gets
                                             this cell's frames; "more": hand
                                             its reader off every this many seconds)
  {"op": "interrupt"}                       KeyboardInterrupt in the running cell
Frames:
  {"t": "start", "id": ID}
  {"t": "o" | "e", "d": TEXT}               stdout or stderr bytes (surrogateescape)
  {"t": "done", "id": ID, "code": EXIT, "interrupted": BOOL, "cut": [OUT, ERR]}
  {"t": "more"}                             the reader is handed off: the cell's next
                                            frames go to the FIFO's next reader

Two transports: in stdio mode requests come on stdin and frames go to stdout; in FIFO
mode (`--fifo FOLDER`) requests come through FOLDER/in, each cell names the FIFO its frames
go to, and FOLDER/lock is held while the kernel lives.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import fcntl
import json
import os
import queue
import select
import shutil
import signal
import sys
import threading
from typing import Any

from sci_kernel_cells import Cells, Charts, cap_memory, cpu_budget
from sci_kernel_output import Frames, Stream, remove

WATCH_S = 2.0  # how often an idle kernel checks that its folder (FIFO mode) still exists
_KEEP: list[Any] = []  # objects that must live as long as the process


class Kernel:
    """Runs the cells it is sent one at a time, in the main thread (signals go there)."""

    def __init__(self, args: argparse.Namespace, frames: Frames, streams: tuple[Any, ...]) -> None:
        self.args, self.frames, self.streams = args, frames, streams
        self.requests: queue.Queue[Any] = queue.Queue()
        self.main_thread = threading.get_ident()
        self.cells = Cells(Charts(args.out_dir))

    def take(self, line: bytes) -> None:
        """A request line, from the request thread."""
        try:
            request = json.loads(line)
        except ValueError:
            return
        if request.get("op") == "interrupt" and self.cells.running:
            signal.pthread_kill(self.main_thread, signal.SIGINT)
        elif request.get("op") == "run":
            self.requests.put(request)

    def serve(self) -> None:
        while (request := self.requests.get()) is not None:
            self.run(request)

    def run(self, request: dict[str, Any]) -> None:
        out = request.get("out")
        self.frames.open_cell(out, _seconds(request.get("more")))
        self.frames.send({"t": "start", "id": request.get("id")})
        for stream in self.streams:
            stream.attach(self.args.output_bytes)
        cpu_budget(self.args.cpu_s)
        signal.signal(signal.SIGINT, self._on_sigint)  # the last cell may have replaced it
        try:
            code, interrupted = self.cells.run(_source(request))
        except OSError as exc:  # the cell's file could not be read
            print(f"cannot read the cell: {exc}", file=sys.stderr)
            code, interrupted = 1, False
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        for stream in self.streams:
            stream.sync()
        cut = [stream.detach() for stream in self.streams]
        done = {"t": "done", "id": request.get("id"), "code": code, "interrupted": interrupted}
        self.frames.send({**done, "cut": cut})
        self.frames.close_cell(out)

    def _on_sigint(self, signum: Any, frame: Any) -> None:
        if self.cells.running:
            raise KeyboardInterrupt


def _taken_over(folder: str | None, kernel: Kernel) -> bool:
    """A newer kernel has cleared this one's folder away. Only an idle kernel looks: a
    running cell may move the folder itself, and its reader is still there."""
    return folder is not None and not kernel.cells.running and not os.path.isdir(folder)


def serve_io(fd: int, folder: str | None, kernel: Kernel) -> None:
    """The kernel's one I/O thread: requests, and the output of fds 1 and 2. (Threads count
    against the sandbox's process limit, shared by every sandbox.)"""
    streams = {stream.read_fd: stream for stream in kernel.streams}
    pending = b""
    while True:
        wait = kernel.frames.wait_s()
        if folder is not None:
            wait = WATCH_S if wait is None else min(wait, WATCH_S)
        ready = select.select([fd, *streams, kernel.frames.wake], [], [], wait)[0]
        kernel.frames.tick()
        if kernel.frames.wake in ready:
            os.read(kernel.frames.wake, 512)
            ready.remove(kernel.frames.wake)
        if not ready and _taken_over(folder, kernel):
            os._exit(0)
        for source in ready:
            data = os.read(source, 65536)
            if source in streams:
                if data:
                    streams[source].feed(data)
                else:  # the cell closed the fd for good
                    del streams[source]
            elif not data:
                kernel.requests.put(None)  # the bot has closed the channel
                return
            else:
                pending += data
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    kernel.take(line)


def _fifo_channel(folder: str) -> int:
    """Requests come through folder/in; folder/lock is held while the kernel lives. Earlier
    kernels' folders are removed, and those kernels exit when they notice."""
    os.makedirs(folder, exist_ok=True)
    parent = os.path.dirname(folder)
    for name in os.listdir(parent):
        if os.path.join(parent, name) != folder:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
    inbox = os.path.join(folder, "in")
    os.mkfifo(inbox, 0o600)
    fd = os.open(inbox, os.O_RDWR)  # open both ways: writers never block, reads see no EOF
    lock = os.open(os.path.join(folder, "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    return fd


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0


def _source(request: dict[str, Any]) -> str:
    if "code" in request:
        return str(request["code"])
    try:
        with open(request["file"], encoding="utf-8", errors="replace") as handle:
            return handle.read()
    finally:
        remove(request["file"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fifo", help="serve requests on this folder's FIFO, not stdin")
    parser.add_argument("--output-bytes", type=int, default=1 << 20)
    parser.add_argument("--cpu-s", type=int, default=0)
    parser.add_argument("--memory-share", type=float, default=0.0)
    parser.add_argument("--out-dir", default="/buddy/work/out")
    args = parser.parse_args(argv)
    if args.memory_share:
        cap_memory(args.memory_share)
    if args.fifo:
        requests, frames = _fifo_channel(args.fifo), Frames(None)
    else:
        requests, frames = os.dup(0), Frames(os.dup(1))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _KEEP.append(os.fdopen(os.dup(2), "w"))  # fatal errors go to the kernel's own stderr
    faulthandler.enable(_KEEP[-1])
    streams = (Stream(1, "o", frames), Stream(2, "e", frames))
    sys.argv = [""]
    sys.path[0] = ""  # as in a notebook: modules in the working folder can be imported
    kernel = Kernel(args, frames, streams)
    threading.Thread(target=serve_io, args=(requests, args.fifo, kernel), daemon=True).start()
    kernel.serve()


if __name__ == "__main__":
    main()
