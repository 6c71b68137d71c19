"""The real Slack app (`bot.slack.listen.app.serve`) against fake Slack, model and Buddy servers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from bot.slack.listen.app import serve
from bot.store.redis_store import RedisStore
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.buddy import FakeBuddy
from tests.fakes.slack import FakeSlack
from tests.support import buddy_settings, settings_for

CHANNEL = "C0CHAN001"
# Slack's documented rate tiers are on in the fake, sped up this much, and the bot paces to
# the same speed-up; a test asks for Slack's own rates with REAL_TIERS (both at 1).
TIERS = 10.0
REAL_TIERS = {"rate_limits": 1.0}
NO_TIERS: dict[str, Any] = {"rate_limits": None}  # no limits in the fake (benchmarks)
UNPACED = 1000.0  # the bot's pacing out of the way, where the fake sets no limits


@dataclass
class Harness:
    slack: FakeSlack
    model: FakeAnthropic
    buddy: FakeBuddy | None
    settings: Settings
    root: Path

    def bot_messages(self, thread_ts: str, channel: str = CHANNEL) -> list[dict[str, Any]]:
        return [m for m in self.slack.thread(channel, thread_ts) if m.get("bot_id")]

    def texts(self, thread_ts: str, channel: str = CHANNEL) -> str:
        return "\n".join(all_text(m) for m in self.bot_messages(thread_ts, channel))

    def sandboxes_alive(self) -> int:
        if self.buddy is not None:
            return len(self.buddy.sandboxes)
        return sum(1 for p in self.root.iterdir() if p.name.startswith("lcl-"))

    async def wait_for_text(
        self, thread_ts: str, needle: str, timeout: float = 20, channel: str = CHANNEL
    ) -> None:
        await self.slack.wait_for(lambda: needle in self.texts(thread_ts, channel), timeout)

    def runs(self, thread_ts: str, channel: str = CHANNEL) -> list[tuple[str, str | None]]:
        """The thread's runs from the store, oldest first: (question, outcome), the outcome
        None while the run goes."""
        rows = self._query(
            "SELECT question, outcome FROM runs WHERE key = ? ORDER BY started_at",
            f"{self.slack.team_id}:{channel}:{thread_ts}",
        )
        return [(str(q), o) for q, o in rows]

    def queued(self, thread_ts: str, channel: str = CHANNEL) -> list[str]:
        """The thread's questions waiting in the store for the next run."""
        key = f"{self.slack.team_id}:{channel}:{thread_ts}"
        return [str(q) for (q,) in self._query("SELECT question FROM queue WHERE key = ?", key)]

    async def wait_for_runs(
        self, thread_ts: str, n: int, channel: str = CHANNEL, timeout: float = 20
    ) -> list[tuple[str, str | None]]:
        """The thread's runs once `n` of them have ended: the moment a later event has
        passed, rather than a guess at how long it takes."""
        if self.settings.redis_url:
            return await self._wait_for_redis_runs(thread_ts, n, channel, timeout)
        ended = lambda: sum(o is not None for _, o in self.runs(thread_ts, channel)) >= n  # noqa: E731
        await self.slack.wait_for(ended, timeout)
        return self.runs(thread_ts, channel)

    async def _wait_for_redis_runs(
        self, thread_ts: str, n: int, channel: str, timeout: float
    ) -> list[tuple[str, str | None]]:
        """wait_for_runs on a bot whose store is Redis, read through the bot's own reader."""
        store = RedisStore(str(self.settings.redis_url))
        await store.open()
        key = f"{self.slack.team_id}:{channel}:{thread_ts}"
        deadline = time.monotonic() + timeout
        try:
            while True:
                runs = [(r.question, r.outcome) for r in await store.runs(key)]
                if sum(o is not None for _, o in runs) >= n:
                    return runs
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{n} runs did not end within {timeout}s")
                await asyncio.sleep(0.02)
        finally:
            await store.close()

    def _query(self, sql: str, *args: str) -> list[tuple]:
        if not self.settings.store_path.exists():
            return []
        with contextlib.closing(sqlite3.connect(self.settings.store_path, timeout=5)) as db:
            try:
                return db.execute(sql, args).fetchall()
            except sqlite3.OperationalError:  # the bot has not made its tables yet
                return []


def all_text(message: dict[str, Any]) -> str:
    parts = [message.get("text") or ""]
    for block in message.get("blocks") or []:
        parts.append(_text_of(block.get("text")))
        parts += [_text_of(e.get("text")) for e in block.get("elements") or []]
        for task in block.get("tasks") or []:  # a streamed message's plan
            parts += [str(task.get(k) or "") for k in ("title", "details", "output")]
    return "\n".join(parts)


def _text_of(value: Any) -> str:
    return str(value.get("text", "")) if isinstance(value, dict) else str(value or "")


@contextlib.asynccontextmanager
async def fake_world(
    backend: str,
    model_fn: Callable,
    root: Path,
    monkeypatch: pytest.MonkeyPatch | None,
    slack_options: dict[str, Any] | None = None,
    buddy_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> AsyncIterator[Harness]:
    """Fake Slack, model (and Buddy) servers, and the settings that point the bot at them:
    the agent UI, and Slack's rate tiers at `TIERS` (`slack_options` may change them; the
    fake Buddy boots in 0.05 s unless `buddy_options` say otherwise).
    Proxy variables are cleared (through `monkeypatch` in tests; for good in a benchmark),
    since the Slack clients would send loopback calls through a proxy."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        if monkeypatch is None:
            os.environ.pop(name, None)
        else:
            monkeypatch.delenv(name, raising=False)
    async with contextlib.AsyncExitStack() as stack:
        options = {"rate_limits": TIERS, **(slack_options or {})}
        slack = await stack.enter_async_context(FakeSlack(**options))
        model = await stack.enter_async_context(FakeAnthropic(model_fn))
        buddy = None
        extra: dict[str, Any] = {}
        if backend == "buddy":
            buddy_options = {"boot_delay_s": 0.05, **(buddy_options or {})}
            buddy = await stack.enter_async_context(FakeBuddy(root, **buddy_options))
            extra = buddy_settings(buddy.base_url)
        settings = settings_for(
            model.base_url,
            root,
            slack_bot_token="xoxb-test-token",
            slack_app_token="xapp-1-A0FAKE001-1-test",
            slack_api_url=slack.api_url,
            # the fake CDN stands in for Slack's (plain http, another origin): reachable
            slack_cdn_origins=slack.cdn.base_url if slack.cdn else "",
            orphan_cleanup=False,
            store_path=root / "sessions.db",
            # the default UI (tests of the classic one ask for it), paced to the fake's tiers
            **{
                "slack_ui": "assistant",
                "slack_rate_scale": options["rate_limits"] or UNPACED,
                **extra,
                **overrides,
            },
        )
        yield Harness(slack, model, buddy, settings, root)


@contextlib.asynccontextmanager
async def bot_process(h: Harness, **overrides: Any) -> AsyncIterator[None]:
    """The app's main coroutine, connected to the fakes; stopped as SIGTERM stops it."""
    settings = h.settings.model_copy(update=overrides)
    stop = asyncio.Event()
    connections = h.slack.connections
    task = asyncio.create_task(serve(settings, stop))
    try:
        await h.slack.wait_for(lambda: h.slack.connections > connections or task.done(), 15)
        if task.done():
            task.result()
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def running_bot(
    backend: str,
    model_fn: Callable,
    root: Path,
    monkeypatch: pytest.MonkeyPatch | None,
    slack_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> AsyncIterator[Harness]:
    async with (
        fake_world(backend, model_fn, root, monkeypatch, slack_options, **overrides) as h,
        bot_process(h),
    ):
        yield h
