"""The kernel's output side: frames to the bot, and the capture of fds 1 and 2.

Output is captured at the file descriptors, so child processes are caught too, and capped
per cell and stream as the bot caps it: the first half of the limit is sent as it comes,
the last half when the cell ends, and the bytes in between are only counted ("cut").
Copied into the sandbox with `sci_kernel`; standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading
import time
from typing import Any

SYNC = b"\x00\x1bkernel-sync-" + os.urandom(8).hex().encode() + b"\x00"
FRAME_BYTES = 32 * 1024
SYNC_WAIT_S = 5.0
FIFO_OPEN_WAIT_S = 10.0


class Frames:
    """Where frames go: the kernel's own channel (stdio mode) or the running cell's FIFO."""

    def __init__(self, fd: int | None) -> None:
        self.default = fd
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, frame: dict[str, Any]) -> None:
        line = (json.dumps(frame) + "\n").encode()
        with self.lock:
            if self.fd is None:
                return
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(self.fd, view) :]
            except OSError:
                if self.fd == self.default:
                    os._exit(0)  # the bot has gone
                self.fd = None  # the cell's reader has gone: drop the rest of its frames

    def open_cell(self, path: str | None) -> None:
        if path:
            fd = open_fifo(path)
            with self.lock:
                self.fd = fd

    def close_cell(self, path: str | None) -> None:
        if not path:
            return
        with self.lock:
            fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
        remove(path)


class Capped:
    """One stream of one cell: the head is sent as it comes, the tail kept until the end."""

    def __init__(self, limit: int, send: Any) -> None:
        self.head = limit // 2
        self.tail_cap = limit - self.head
        self.tail = bytearray()
        self.cut = 0
        self.send = send

    def write(self, data: bytes) -> None:
        if self.head > 0:
            piece, data = data[: self.head], data[self.head :]
            self.head -= len(piece)
            self._send(piece)
        if data:
            self.tail += data
            extra = len(self.tail) - self.tail_cap
            if extra > 0:
                del self.tail[:extra]
                self.cut += extra

    def finish(self) -> int:
        self._send(bytes(self.tail))
        return self.cut

    def _send(self, data: bytes) -> None:
        for start in range(0, len(data), FRAME_BYTES):
            self.send(data[start : start + FRAME_BYTES])


class Stream:
    """fd 1 or 2, turned into a pipe whose reader (the kernel's I/O thread) calls `feed`;
    output between cells is dropped."""

    def __init__(self, fd: int, kind: str, frames: Frames) -> None:
        self.read_fd, write = os.pipe()
        os.dup2(write, fd)
        os.close(write)
        self.fd, self.kind, self.frames = fd, kind, frames
        self.sink: Capped | None = None
        self.lock = threading.Lock()
        self.synced = threading.Event()
        self.carry = b""  # the start of a SYNC marker cut by a read

    def attach(self, limit: int) -> None:
        def send(data: bytes) -> None:
            self.frames.send({"t": self.kind, "d": data.decode("utf-8", "surrogateescape")})

        with self.lock:
            self.sink = Capped(limit, send)

    def detach(self) -> int:
        with self.lock:
            sink, self.sink = self.sink, None
        return sink.finish() if sink is not None else 0

    def sync(self) -> None:
        """Wait until what was written to the fd so far has reached the sink."""
        self.synced.clear()
        try:
            os.write(self.fd, SYNC)
        except OSError:
            return
        self.synced.wait(SYNC_WAIT_S)

    def feed(self, data: bytes) -> None:
        """Bytes read from the pipe; a SYNC marker among them says the fd is drained."""
        data = self.carry + data
        while (index := data.find(SYNC)) >= 0:
            self._forward(data[:index])
            data = data[index + len(SYNC) :]
            self.synced.set()
        keep = next((n for n in range(len(SYNC) - 1, 0, -1) if data.endswith(SYNC[:n])), 0)
        self._forward(data[: len(data) - keep])
        self.carry = data[len(data) - keep :]

    def _forward(self, data: bytes) -> None:
        if data:
            with self.lock:
                if self.sink is not None:
                    self.sink.write(data)


def open_fifo(path: str) -> int | None:
    """Open a cell's FIFO for writing once its reader is there (None if it never comes)."""
    deadline = time.monotonic() + FIFO_OPEN_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                return None
            time.sleep(0.002)
            continue
        os.set_blocking(fd, True)
        return fd


def remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
