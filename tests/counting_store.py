"""A store wrapper that counts the session records each call hands back: how much of the
store a pass (the reaper's, the orphan sweeper's) reads."""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from typing import Any, cast

from bot.store.base import SessionRecord, Store


class CountingStore:
    """Passes every call on to `store`, counting the SessionRecords returned, by method."""

    def __init__(self, store: Store) -> None:
        self.inner = store
        self.sessions_read: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.sessions_read.values())

    def reset(self) -> None:
        self.sessions_read.clear()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(method):
            return method

        @functools.wraps(method)
        async def call(*args: Any, **kwargs: Any) -> Any:
            result = await method(*args, **kwargs)
            if isinstance(result, SessionRecord):
                self.sessions_read[name] += 1
            elif isinstance(result, list):
                self.sessions_read[name] += sum(isinstance(r, SessionRecord) for r in result)
            return result

        return call


def counting(store: Store) -> tuple[Store, CountingStore]:
    """`store` wrapped, typed as a Store, and the counter."""
    wrapper = CountingStore(store)
    return cast(Store, wrapper), wrapper
