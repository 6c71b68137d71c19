"""Slack's rate tiers in the fake (slack-platform.md §6.3): a call over its method's limit gets
HTTP 429 with ``Retry-After`` (whole seconds) and ``{"ok": false, "error": "ratelimited"}``.

Each limit is a token bucket per workspace and method (``chat.postMessage``: per channel),
holding a burst and refilled at the tier's rate. The docs give tiers as "N+ per minute" with
"occasional bursts"; the fake takes the N as the rate and a fifth of a minute's calls as the
burst. ``chat.postMessage`` is one a second per channel with bursts of 3 ("short bursts").
``assistant.threads.setStatus`` is "special" in the docs, with no figure: it is not limited.
``scale`` speeds time up for tests: scale 10 allows ten times the calls.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

TIER_2, TIER_3, TIER_4 = 20, 50, 100  # calls a minute
PER_MINUTE = {
    "chat.update": TIER_3,
    "chat.delete": TIER_3,
    "reactions.add": TIER_3,
    "reactions.remove": TIER_3,
    "conversations.replies": TIER_3,
    "chat.postEphemeral": TIER_4,
    "files.getUploadURLExternal": TIER_4,
    "files.completeUploadExternal": TIER_4,
    "files.info": TIER_4,
    "chat.startStream": TIER_2,
    "chat.stopStream": TIER_2,
    "chat.appendStream": TIER_4,
    "assistant.threads.setSuggestedPrompts": TIER_4,
    "assistant.threads.setTitle": TIER_4,
    "canvases.create": TIER_2,
    "conversations.canvases.create": TIER_2,
    "canvases.edit": TIER_3,
    "canvases.access.set": TIER_3,
    "canvases.access.delete": TIER_3,
    "canvases.sections.lookup": TIER_3,
    "canvases.delete": TIER_3,
    "canvases.getContent": TIER_3,  # no tier published; taken as its neighbours'
    "blocks.validate": TIER_3,  # no tier published; taken as the canvas methods'
    "agents.sessions.setStatus": TIER_3,  # docs.slack.dev: methods/agents.sessions.setStatus
    "agents.sessions.rename": TIER_3,
    "views.open": TIER_4,  # its method page
}
POSTS_PER_S, POST_BURST = 1.0, 3


@dataclass
class _Bucket:
    rate: float  # tokens a second
    burst: float
    tokens: float
    stamp: float

    def take(self, now: float) -> float:
        """0 when a call may go now (one token taken), else the seconds until it may."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class RateLimits:
    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    def retry_after(self, method: str, team: str, channel: str) -> int | None:
        """None if the call may go, else the whole seconds to wait (at least 1)."""
        if method == "chat.postMessage":
            key, rate, burst = (method, channel), POSTS_PER_S, POST_BURST
        elif method in PER_MINUTE:
            per_minute = PER_MINUTE[method]
            key, rate, burst = (method, team), per_minute / 60, max(3, per_minute // 5)
        else:
            return None
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(rate * self.scale, burst, burst, now)
        wait = bucket.take(now)
        return max(1, math.ceil(wait)) if wait else None
