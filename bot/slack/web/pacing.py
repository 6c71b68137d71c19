"""Slack's rate tiers, kept by waiting before a call rather than by collecting 429s.

Limits are per method and workspace (Tier 2: 20 a minute, Tier 3: 50, Tier 4: 100), and
`chat.postMessage` one a second per channel with short bursts. The bot takes 90% of each
rate and keeps one call of each burst in reserve, so that network jitter (two calls
arriving closer together than they left) does not push a call over. `scale` multiplies every rate (a
test against a fake with faster tiers). `assistant.threads.setStatus` has no published
figure and is not paced: it is the sign that a question was seen, and must not wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

TIER_2, TIER_3, TIER_4 = 20, 50, 100  # calls a minute
PER_MINUTE = {
    "chat.update": TIER_3,
    "chat.delete": TIER_3,
    "reactions.add": TIER_3,
    "chat.postEphemeral": TIER_4,
    "files.upload": TIER_4,  # files.getUploadURLExternal and files.completeUploadExternal
    "chat.startStream": TIER_2,
    "chat.stopStream": TIER_2,
    "chat.appendStream": TIER_4,
    "assistant.threads.setSuggestedPrompts": TIER_4,
    "assistant.threads.setTitle": TIER_4,
    "conversations.replies": TIER_3,
    "canvases.create": TIER_2,
    "canvases.edit": TIER_3,
    "canvases.access.set": TIER_3,
    "canvases.delete": TIER_3,
    "agents.sessions.setStatus": TIER_3,
}
POSTS_PER_S, POST_BURST = 1.0, 2  # Slack's bursts: about 3
HEADROOM = 0.9
NOTICE_S = 2.0  # a wait longer than this is shown to the people waiting

OnWait = Callable[[float], Awaitable[None]]  # told the seconds a call will wait


class TokenBucket:
    """`rate` calls per second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate, self._burst = rate, burst
        self._tokens, self._stamp = float(burst), time.monotonic()
        self._lock = asyncio.Lock()
        self._queued = 0

    def wait_s(self) -> float:
        """About how long a call asking now would wait."""
        tokens = self._tokens + (time.monotonic() - self._stamp) * self._rate
        return max(0.0, (self._queued + 1 - min(tokens, self._burst)) / self._rate)

    async def take(self) -> None:
        self._queued += 1
        try:
            async with self._lock:
                while True:
                    now = time.monotonic()
                    elapsed = (now - self._stamp) * self._rate
                    self._tokens = min(self._burst, self._tokens + elapsed)
                    self._stamp = now
                    if self._tokens >= 1:
                        self._tokens -= 1
                        return
                    await asyncio.sleep((1 - self._tokens) / self._rate)
        finally:
            self._queued -= 1


class Pacer:
    def __init__(self, scale: float = 1.0) -> None:
        self._scale = scale
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    async def take(
        self, method: str, channel: str = "", *, count: int = 1, on_wait: OnWait | None = None
    ) -> None:
        """Wait for `count` calls of `method` (in `channel`) to be allowed; `on_wait` hears
        first when that will take long."""
        bucket = self._bucket(method, channel)
        if bucket is None:
            return
        if on_wait is not None and (wait := bucket.wait_s() * count) > NOTICE_S:
            await on_wait(wait)
        for _ in range(count):
            await bucket.take()

    def wait_s(self, method: str, channel: str = "") -> float:
        """About how long a call of `method` asking now would wait (0: not paced)."""
        bucket = self._bucket(method, channel)
        return bucket.wait_s() if bucket is not None else 0.0

    def _bucket(self, method: str, channel: str) -> TokenBucket | None:
        if method == "chat.postMessage":
            key, rate, burst = (method, channel), POSTS_PER_S, POST_BURST
        elif method in PER_MINUTE:
            per_minute = PER_MINUTE[method]
            key, rate, burst = (method, ""), per_minute / 60, max(2, per_minute // 5 - 1)
        else:
            return None
        if key not in self._buckets:
            self._buckets[key] = TokenBucket(rate * HEADROOM * self._scale, burst)
        return self._buckets[key]
