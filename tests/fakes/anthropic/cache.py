"""Prompt-cache emulation and usage accounting (doc sections 1.6 and 3).

A cached prefix is matched as the client sent it: each block's JSON with its key order and
every field kept (only its ``cache_control`` marker set aside, since moving a breakpoint is
how caching works). A resend that is not byte-identical, such as a tool schema rebuilt with
its keys in another order or an earlier message re-serialised, misses the cache, and
``usage`` shows a cache write where a read was expected.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic.blocks import as_sent, block_payload, tokens, without_marker

CACHE_LOOKBACK_BLOCKS = 20  # 3 "Breakpoints": each looks back about 20 blocks for a hit
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}  # 3 "Marker": 5 minutes unless `ttl: "1h"`


@dataclass
class _Entry:
    tokens: int
    ttl_s: float
    expires_at: float


@dataclass(frozen=True)
class _Segment:
    """One cacheable block of the prompt, with the hash of the prefix it ends."""

    digest: str
    end_tokens: int  # cumulative prompt tokens up to and including this block
    cache_control: dict[str, Any] | None


def _parts(content: Any) -> list[Any]:
    """A message's or system's blocks; a bare string stays a string (it is sent as one)."""
    if isinstance(content, str):
        return [content]
    return list(content) if isinstance(content, list) else []


def _segments(body: dict[str, Any]) -> list[_Segment]:
    """The prompt in cache order (tools, system, messages), one segment per block."""
    running = hashlib.sha256(as_sent({"model": body.get("model")}).encode())
    total = 0
    out: list[_Segment] = []

    def add(kind: str, part: Any) -> None:
        nonlocal total
        key = as_sent(without_marker(part) if isinstance(part, dict) else part)
        running.update(as_sent(kind).encode() + key.encode())
        total += tokens(key)
        marker = part.get("cache_control") if isinstance(part, dict) else None
        out.append(_Segment(running.hexdigest(), total, marker))

    for tool in body.get("tools") or []:
        add("tool", tool)
    for part in _parts(body.get("system")):
        add("system", part)
    # 3: tool_choice and thinking settings invalidate the message part of the cache only
    running.update(as_sent([body.get("tool_choice"), body.get("thinking")]).encode())
    for message in body.get("messages", []):
        for part in _parts(message.get("content")):
            add(message.get("role", ""), part)
    return out


def _breakpoints(body: dict[str, Any], segments: list[_Segment]) -> list[tuple[int, str]]:
    """(segment index, ttl) of every cache breakpoint, in prompt order."""
    points = {i: s.cache_control for i, s in enumerate(segments) if s.cache_control}
    if body.get("cache_control") and segments:
        points.setdefault(len(segments) - 1, body["cache_control"])
    return [(i, cc.get("ttl", "5m")) for i, cc in sorted(points.items())]


class PromptCache:
    """Deterministic prompt-cache bookkeeping: prefix hash → prefix token count and expiry.

    An entry lives for its TTL (5 minutes, or 1 hour with `ttl: "1h"`) on ``clock`` (seconds;
    a test passes its own to move time on), and a hit refreshes it at no cost (doc 3).
    ``clear()`` drops every entry at once.
    """

    def __init__(self, min_tokens: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_tokens = min_tokens
        self.clock = clock
        self.entries: dict[str, _Entry] = {}

    def clear(self) -> None:
        self.entries.clear()

    def input_usage(self, body: dict[str, Any]) -> dict[str, Any]:
        segments = _segments(body)
        total = segments[-1].end_tokens if segments else 0
        breakpoints = _breakpoints(body, segments)
        now = self.clock()
        self.entries = {k: e for k, e in self.entries.items() if e.expires_at > now}
        hit = self._furthest_hit(segments, breakpoints)
        if hit >= 0:  # a read refreshes what it read
            entry = self.entries[segments[hit].digest]
            entry.expires_at = now + entry.ttl_s
        read = segments[hit].end_tokens if hit >= 0 else 0
        written = {"5m": 0, "1h": 0}
        covered = read
        for index, ttl in breakpoints:
            seg = segments[index]
            if index <= hit or seg.end_tokens < self.min_tokens:
                continue
            ttl = ttl if ttl in written else "5m"
            self.entries[seg.digest] = _Entry(
                seg.end_tokens, TTL_SECONDS[ttl], now + TTL_SECONDS[ttl]
            )
            written[ttl] += seg.end_tokens - covered
            covered = seg.end_tokens
        creation = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _furthest_hit(self, segments: list[_Segment], breakpoints: list[tuple[int, str]]) -> int:
        """Index of the longest cached prefix within the lookback window of any breakpoint."""
        best = -1
        for index, _ in breakpoints:
            for i in range(index, max(index - CACHE_LOOKBACK_BLOCKS, -1), -1):
                if segments[i].digest in self.entries:
                    best = max(best, i)
                    break
        return best


def zero_input_usage() -> dict[str, Any]:
    """The input side of a usage that read no prompt."""
    return {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    }


def total_input_tokens(body: dict[str, Any]) -> int:
    segments = _segments(body)
    return segments[-1].end_tokens if segments else 0


def output_usage(content: list[dict[str, Any]]) -> dict[str, Any]:
    thinking_tokens = sum(tokens(b["thinking"]) for b in content if b.get("type") == "thinking")
    total = sum(tokens(block_payload(b)) for b in content)
    return {
        "output_tokens": max(1, total),
        "output_tokens_details": {"thinking_tokens": thinking_tokens},
    }
