"""Several real bot processes (`python -m bot`) sharing one private redis-server, against
the fake Slack (which spreads events over their connections at random), model and Buddy.
Replica i is the i-th to connect, so its connection's index is i."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.store.redis_store import RedisStore
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.redis_server import RedisServer, redis_server
from tests.slack_harness import Harness, fake_world
from tests.support import settings_env

START_S = 30


def script(req: ModelRequest) -> Reply:
    """ "slow": a 4 s step; "note X": appends X to notes.txt; "read": reads it back; else an
    answer naming how many questions the conversation holds."""
    asked = [_text(m) for m in req.messages if m["role"] == "user" and _text(m)]
    if not _text(req.messages[-1]):  # tool results only (a question's message has text)
        result = req.tool_results()[-1].text.strip()
        return Reply([text(f"done ({len(asked)} questions): {result[-80:]}")])
    last = asked[-1] if asked else ""
    if note := re.search(r"note (\w+)", last):
        code = f"open('/buddy/work/notes.txt', 'a').write('note {note[1]}\\n'); print('noted')"
    elif "slow" in last:
        code = "import time; time.sleep(4); print('slept')"
    elif "read" in last:
        code = "print(open('/buddy/work/notes.txt').read())"
    else:
        return Reply([text(f"answer ({len(asked)} questions) to: {last.split()[-1]}")])
    return Reply([tool_use("run_code", {"language": "python", "code": code})])


def _text(message: dict) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content if b.get("type") == "text").strip()


def answers(r: Replicas, thread: str) -> list[str]:
    return [
        m.get("text", "")
        for m in r.h.bot_messages(thread)
        if m.get("text", "").startswith(("answer", "done"))
    ]


class Replicas:
    def __init__(self, h: Harness, redis: RedisServer) -> None:
        self.h, self.redis = h, redis
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self, **extra: Any) -> int:
        """One more replica, connected to Slack; returns its index."""
        return (await self.start_together(1, **extra))[0]

    async def start_together(self, n: int, **extra: Any) -> list[int]:
        """`n` more replicas launched at once (their start-ups overlap), each connected to
        Slack; returns their indexes. Each is given the index of its connection, found by
        the connection's client port, so replica i is still the i-th to connect."""
        first, connections = len(self.procs), self.h.slack.connections
        env = settings_env(self.h.settings, **extra)
        launched = []
        for k in range(n):
            log = self._log_path(first + k).open("ab")
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", env=env, cwd=self.h.root,
                stdout=log, stderr=log,
            )  # fmt: skip
            log.close()
            launched.append(proc)
        try:
            await self.h.slack.wait_for(
                lambda: (
                    self.h.slack.connections >= connections + n
                    or any(proc.returncode is not None for proc in launched)
                ),
                START_S,
            )
            for k, proc in enumerate(launched):
                assert proc.returncode is None, self._log_path(first + k).read_text()[-4000:]
            assert self.h.slack.connections == connections + n, "a replica connected twice"
            ports = self.h.slack.connection_ports[connections:]
            slack_port = urlsplit(self.h.slack.base_url).port
            order = [ports.index(_port_to(slack_port, proc.pid, ports)) for proc in launched]
        except BaseException:
            self.procs += launched  # stopped with the others
            raise
        # Replica k of the launch is connection order[k]: its log follows it there.
        for k in range(n):
            self._log_path(first + k).rename(self._log_path(first + k, ".launched"))
        for k in range(n):
            self._log_path(first + k, ".launched").rename(self._log_path(first + order[k]))
        self.procs += [launched[order.index(j)] for j in range(n)]
        return list(range(first, first + n))

    async def idle(self, timeout: float = 30) -> None:
        """Until no run is in flight in the shared store (each one's end recorded)."""
        store = RedisStore(self.redis.url)
        await store.open()
        try:
            deadline = asyncio.get_running_loop().time() + timeout
            while await store.runs_in_flight():
                assert asyncio.get_running_loop().time() < deadline, "runs still in flight"
                await asyncio.sleep(0.05)
        finally:
            await store.close()

    async def kill(self, index: int) -> None:
        """A crash: no clean-up at all."""
        self.procs[index].send_signal(signal.SIGKILL)
        await self.procs[index].wait()

    def pause(self, index: int) -> None:
        """Freeze the process (SIGSTOP): its connections stay open, nothing of it runs."""
        self.procs[index].send_signal(signal.SIGSTOP)

    def resume(self, index: int) -> None:
        self.procs[index].send_signal(signal.SIGCONT)

    async def term(self, index: int) -> int:
        self.procs[index].send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.procs[index].wait(), 60)

    async def stop_all(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGCONT)  # a paused one would not see the SIGTERM
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 60)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    def _log_path(self, index: int, suffix: str = "") -> Path:
        return self.h.root / f"replica-{index}.log{suffix}"

    def log(self, index: int) -> str:
        path = self._log_path(index)
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def _port_to(server_port: int | None, pid: int, ports: list[int]) -> int:
    """Which of `ports` (client ports of connections to `server_port`) is a TCP socket of
    process `pid`: the sockets among its open files, looked up in its network's tables."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                port = int(fields[1].rsplit(":", 1)[1], 16)
                to = int(fields[2].rsplit(":", 1)[1], 16)
                if fields[9] in inodes and port in ports and to == server_port:
                    found.add(port)
    assert len(found) == 1, f"process {pid} holds Slack connections on ports {found}"
    return found.pop()


@contextlib.asynccontextmanager
async def replicas(
    model_fn: Callable,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    n: int = 2,
    slack_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> AsyncIterator[Replicas]:
    async with (
        redis_server(root / "redis") as redis,
        fake_world(
            "buddy", model_fn, root, monkeypatch, {"spread_events": True, **(slack_options or {})},
            redis_url=redis.url, shutdown_grace_s=5, **overrides,
        ) as h,
    ):  # fmt: skip
        group = Replicas(h, redis)
        try:
            if n:
                await group.start_together(n)
            yield group
        except BaseException:
            for i in range(len(group.procs)):  # shown by pytest with the failure
                print(f"--- replica {i} ---\n{group.log(i)}")
            raise
        finally:
            await group.stop_all()
