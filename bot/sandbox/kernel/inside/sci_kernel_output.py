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
import stat
import threading
import time
from typing import Any

SYNC = b"\x00\x1bkernel-sync-" + os.urandom(8).hex().encode() + b"\x00"
FRAME_BYTES = 32 * 1024
SYNC_WAIT_S = 5.0
FIFO_OPEN_WAIT_S = 10.0
HAND_OFF_WAIT_S = 30.0
HAND_OFF_POLL_S = 0.005


class Frames:
    """Where frames go: the kernel's own channel (stdio mode) or the running cell's FIFO.

    A cell may ask for its reader to be handed off every `every` seconds, for readers that
    must end within a time (Buddy ends a sync exec at 60 s): the reader then gets a "more"
    frame and the end of its stream, and the frames that follow are held for the next
    reader, which makes and reads a FIFO of its own, OUT.1, OUT.2, ... (the old reader may
    still hold the old one open). Past HAND_OFF_WAIT_S without one, they are dropped. The
    I/O thread does the hand-offs (`tick`), so nothing blocks while a reader is awaited."""

    def __init__(self, fd: int | None) -> None:
        self.default = fd
        self.fd = fd
        self.lock = threading.Condition()
        self.base: str | None = None  # the running cell's FIFO, as its request named it
        self.hand_offs = 0
        self.every = 0.0  # the running cell's hand-off interval (0: none)
        self.due: float | None = None  # when the current reader is handed off
        self.held: list[bytes] | None = None  # frames awaiting the next reader
        self.gives_up = 0.0  # when to stop awaiting it
        self.wake, self._waker = os.pipe()  # tells the I/O thread a cell has a hand-off due
        os.set_blocking(self._waker, False)

    def send(self, frame: dict[str, Any]) -> None:
        line = (json.dumps(frame) + "\n").encode()
        with self.lock:
            if frame.get("t") == "done":  # no hand-off after it: no reader would come
                self.due = None
            if self.held is not None:
                self.held.append(line)
            else:
                self._write(line)

    def open_cell(self, path: str | None, every: float = 0.0) -> None:
        if path:
            fd = open_fifo(path)
            with self.lock:
                self.fd, self.base, self.every, self.hand_offs = fd, path, every, 0
                self.due = time.monotonic() + every if every > 0 and fd is not None else None
            if self.due is not None:
                with contextlib.suppress(OSError):
                    os.write(self._waker, b"\0")

    def close_cell(self, path: str | None) -> None:
        if not path:
            return
        with self.lock:
            while self.held is not None:  # the last frames go to the next reader first
                self.lock.wait()
            fd, self.fd, self.due = self.fd, None, None
            current, self.base = self.path, None
        if fd is not None:
            os.close(fd)
        remove(path)
        if current is not None and current != path:
            remove(current)

    @property
    def path(self) -> str | None:
        """The FIFO the running cell's frames go to now: its own, or its latest reader's."""
        if self.base is None or not self.hand_offs:
            return self.base
        return f"{self.base}.{self.hand_offs}"

    def wait_s(self) -> float | None:
        """How long the I/O thread may sleep before `tick` has work (None: no limit)."""
        with self.lock:
            if self.held is not None:
                return HAND_OFF_POLL_S
            return None if self.due is None else max(0.0, self.due - time.monotonic())

    def tick(self) -> None:
        """Hand the reader off when it is due; give the held frames to the next reader."""
        with self.lock:
            now = time.monotonic()
            if self.held is None and self.due is not None and now >= self.due:
                self._hand_off(now)
            if self.held is not None and self.path is not None:
                self._reattach(self.path, self.held, now)

    def _hand_off(self, now: float) -> None:
        self._write((json.dumps({"t": "more"}) + "\n").encode())
        if self.fd is not None:
            os.close(self.fd)
        if self.hand_offs and self.path is not None:
            remove(self.path)  # the last reader's own FIFO
        self.hand_offs += 1
        self.fd, self.due = None, None
        self.held, self.gives_up = [], now + HAND_OFF_WAIT_S

    def _reattach(self, path: str, held: list[bytes], now: float) -> None:
        try:
            fd: int | None = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENOENT) and now < self.gives_up:
                return  # no reader yet
            fd = None
        if fd is not None and not stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.close(fd)  # something else stands in the way: the reader replaces it
            if now < self.gives_up:
                return
            fd = None
        if fd is not None:
            os.set_blocking(fd, True)
            self.due = now + self.every
        self.fd, self.held = fd, None
        for line in held:
            self._write(line)
        self.lock.notify_all()

    def _write(self, line: bytes) -> None:
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
