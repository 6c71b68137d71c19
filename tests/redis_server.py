"""A private redis-server for tests: its own loopback port and data folder, append-only file
on, no snapshots, stopped when the test is done. Never a system-wide Redis."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
READY_TIMEOUT_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server on 127.0.0.1 (and on a unix socket if asked) keeping its data in
    `folder`.

    `appendfsync` is "always" by default: every acknowledged write is on disk, the setting
    the README recommends, so a test that kills the server checks the guarantee the bot
    relies on (with "everysec" a killed process loses nothing either; only an OS crash does).
    """

    def __init__(
        self, folder: Path, *, appendfsync: str = "always", unix_socket: bool = False
    ) -> None:
        self.folder = folder
        self.appendfsync = appendfsync
        self.unix_socket = unix_socket
        self.port = 0
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> Path:
        return self.folder / "redis.sock"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.socket_path}?db=0"

    async def start(self) -> None:
        """Start it; on the same port and data as before when it ran already."""
        for _ in range(5):  # a free port may be taken before the server binds it
            port = self.port or free_port()
            if await self._launch(port):
                self.port = port
                return
            if self.port:
                break
        raise RuntimeError(f"redis-server did not start: {self._log_tail()}")

    async def stop(self) -> None:
        """A clean shutdown (SIGTERM): the append-only file is flushed and synced."""
        await self._end(signal.SIGTERM)

    async def kill(self) -> None:
        """A crash (SIGKILL): nothing more reaches the disk."""
        await self._end(signal.SIGKILL)

    async def restart(self, *, crash: bool = True) -> None:
        """Kill (or stop) it and start it again on the same port and data folder."""
        await (self.kill() if crash else self.stop())
        await self.start()

    async def _launch(self, port: int) -> bool:
        self.folder.mkdir(parents=True, exist_ok=True)
        unix = ("--unixsocket", str(self.socket_path), "--unixsocketperm", "700")
        # redis-server 7 takes its settings as arguments; `dir` also holds the AOF folder.
        self.process = await asyncio.create_subprocess_exec(
            REDIS_SERVER,
            *("--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes"),
            *(unix if self.unix_socket else ()),
            *("--dir", str(self.folder), "--save", "", "--appendonly", "yes"),
            *("--appendfsync", self.appendfsync, "--daemonize", "no"),
            *("--logfile", str(self.folder / "redis.log")),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        if await self._ready(port):
            return True
        await self._end(signal.SIGKILL)
        return False

    async def _ready(self, port: int) -> bool:
        """True once it answers PING (not while it is still loading its data)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_S
        while loop.time() < deadline:
            if self.process is None or self.process.returncode is not None:
                return False
            with contextlib.suppress(OSError):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                try:
                    writer.write(b"PING\r\n")
                    if await reader.readline() == b"+PONG\r\n":
                        return True
                finally:
                    writer.close()
            await asyncio.sleep(0.01)
        return False

    async def _end(self, signum: int) -> None:
        process, self.process = self.process, None
        if process is None or process.returncode is not None:
            return
        process.send_signal(signum)
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()

    def _log_tail(self) -> str:
        log = self.folder / "redis.log"
        return log.read_text(errors="replace")[-2000:] if log.exists() else "(no log)"


@contextlib.asynccontextmanager
async def redis_server(
    folder: Path | None = None, *, appendfsync: str = "always", unix_socket: bool = False
) -> AsyncIterator[RedisServer]:
    """A running private server (its URL is `.url`), stopped afterwards; its data goes to
    `folder`, or to a temporary folder removed afterwards."""
    own = folder is None
    folder = folder or Path(tempfile.mkdtemp(prefix="redis-"))
    server = RedisServer(folder, appendfsync=appendfsync, unix_socket=unix_socket)
    try:
        await server.start()
        yield server
    finally:
        await server.kill()
        if own:
            shutil.rmtree(server.folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def redis_url(folder: Path | None = None) -> AsyncIterator[str]:
    """Just the URL of a private server, for tests that only need somewhere to connect."""
    async with redis_server(folder) as server:
        yield server.url
