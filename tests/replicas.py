"""Several real bot processes (`python -m bot`) sharing one private redis-server, against
the fake Slack (which spreads events over their connections at random), model and Buddy.
Replica i is the i-th to connect, so its connection's index is i."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.redis_server import RedisServer, redis_server
from tests.slack_harness import Harness, fake_world
from tests.support import settings_env

START_S = 30


class Replicas:
    def __init__(self, h: Harness, redis: RedisServer) -> None:
        self.h, self.redis = h, redis
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self, **extra: Any) -> int:
        """One more replica, connected to Slack; returns its index."""
        index = len(self.procs)
        connections = self.h.slack.connections
        env = settings_env(self.h.settings, **extra)
        log = (self.h.root / f"replica-{index}.log").open("ab")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", env=env, cwd=self.h.root,
            stdout=log, stderr=log,
        )  # fmt: skip
        log.close()
        self.procs.append(proc)
        await self.h.slack.wait_for(
            lambda: self.h.slack.connections > connections or proc.returncode is not None,
            START_S,
        )
        assert proc.returncode is None, self.log(index)
        return index

    async def kill(self, index: int) -> None:
        """A crash: no clean-up at all."""
        self.procs[index].send_signal(signal.SIGKILL)
        await self.procs[index].wait()

    async def term(self, index: int) -> int:
        self.procs[index].send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.procs[index].wait(), 60)

    async def stop_all(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 60)
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    def log(self, index: int) -> str:
        path = self.h.root / f"replica-{index}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@contextlib.asynccontextmanager
async def replicas(
    model_fn: Callable,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    n: int = 2,
    **overrides: Any,
) -> AsyncIterator[Replicas]:
    async with (
        redis_server(root / "redis") as redis,
        fake_world(
            "buddy", model_fn, root, monkeypatch, {"spread_events": True},
            redis_url=redis.url, shutdown_grace_s=5, **overrides,
        ) as h,
    ):  # fmt: skip
        group = Replicas(h, redis)
        try:
            for _ in range(n):
                await group.start()
            yield group
        finally:
            await group.stop_all()
