"""Edits of the bot's messages, coalesced: a message edited again before its last edit went
out is sent once, with its newest content (chat.update is Tier 3, 50 a minute)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from bot.slack.web.errors import SlackError

log = logging.getLogger(__name__)

Update = Callable[[str, str, str, list[dict[str, Any]]], Awaitable[None]]


class Edits:
    def __init__(self, update: Update) -> None:
        self._update = update  # the seam's chat.update (paced, cleaned)
        self._pending: dict[str, tuple[str, str, list[dict[str, Any]]]] = {}
        self._flushers: dict[str, asyncio.Task[None]] = {}

    def edit(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        """Replace a message's content soon; a newer edit of it supersedes this one."""
        self._pending[ts] = (channel, text, blocks)
        flusher = self._flushers.get(ts)
        if flusher is None or flusher.done():
            self._flushers[ts] = asyncio.create_task(self._flush(ts))

    async def settle(self, messages: Collection[str]) -> None:
        """Wait until the pending edits of these messages (by ts) have been sent; other
        threads' edits are not waited for."""
        while tasks := [t for ts, t in self._flushers.items() if ts in messages and not t.done()]:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _flush(self, ts: str) -> None:
        while edit := self._pending.pop(ts, None):
            channel, text, blocks = edit
            try:
                await self._update(channel, ts, text, blocks)
            except SlackError as exc:  # progress is best effort; the answer is not
                log.warning("could not update message %s: %s", ts, exc.code)
        self._flushers.pop(ts, None)
