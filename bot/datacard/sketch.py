"""Bounded summaries of a stream of values: a distinct-count sketch and a capped top-k."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

_SPAN = 1 << 64  # hash() of a str is a signed 64-bit value, uniformly spread


class Distinct:
    """K minimum values: exact below `k` distinct values, then an estimate within a few
    percent (standard error about 1/sqrt(k)), in O(k) memory. Feed strings only: hash() of
    an int is the int itself, not a spread-out value."""

    def __init__(self, k: int = 1024) -> None:
        self.k = k
        self._kept: set[int] = set()
        self._limit: int | None = None  # the largest kept hash, once the sketch is full

    def add(self, values: Iterable[str]) -> None:
        hashes = set(map(hash, values))
        if self._limit is not None:
            limit = self._limit
            hashes = {h for h in hashes if h < limit}
        self._kept |= hashes
        if len(self._kept) > 2 * self.k:  # trim now and then, not on every batch
            self._trim()

    def _trim(self) -> None:
        self._kept = set(heapq.nsmallest(self.k, self._kept))
        self._limit = max(self._kept)

    def estimate(self) -> tuple[int, bool]:
        """(count, estimated?)"""
        if len(self._kept) > self.k:
            self._trim()
        if self._limit is None:
            return len(self._kept), False
        fraction = (self._limit + _SPAN // 2 + 1) / _SPAN
        return round((self.k - 1) / fraction), True


class TopK:
    """The most common values, in bounded memory: when more than 2 x `cap` values are held,
    the rarest are dropped (a value dropped and seen again restarts from zero, so rare values
    may be undercounted; the frequent ones a profile shows are not)."""

    def __init__(self, cap: int = 256, clip: int = 80) -> None:
        self.cap, self.clip = cap, clip
        self.counts: Counter[str] = Counter()
        self.pruned = False

    def add(self, values: list[str]) -> None:
        clip = self.clip
        if max(map(len, values), default=0) > clip:
            values = [v if len(v) <= clip else v[:clip] + "…" for v in values]
        self.counts.update(values)
        if len(self.counts) > 2 * self.cap:
            self.counts = Counter(dict(self.counts.most_common(self.cap)))
            self.pruned = True

    def top(self, n: int) -> list[tuple[str, int]]:
        return self.counts.most_common(n)
