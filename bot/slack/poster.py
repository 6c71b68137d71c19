"""Every write the bot makes to Slack, paced to stay inside Slack's rate limits.

Posts go out in order, a few at once at most per channel; edits of one message are
coalesced (only the newest text is sent) and paced across the workspace. A 429 is waited
out by the client's retry handler, honouring Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.scrub import NO_SECRETS, Scrubber

log = logging.getLogger(__name__)


class TokenBucket:
    """`rate` calls per second on average, `burst` at once."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate, self._burst = rate, burst
        self._tokens, self._stamp = float(burst), time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
                self._stamp = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self._rate)


@dataclass
class _Edit:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]


class SlackPoster:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        posts_per_s: float = 1.0,
        edits_per_s: float = 0.8,
        scrubber: Scrubber = NO_SECRETS,
    ) -> None:
        self.client = client
        self.scrub = scrubber
        self._posts: defaultdict[str, TokenBucket] = defaultdict(
            lambda: TokenBucket(posts_per_s, burst=5)
        )
        self._edits = TokenBucket(edits_per_s, burst=10)
        # appendStream is Tier 4 (100+ a minute), twice chat.update's Tier 3; startStream and
        # stopStream are Tier 2 but come once per run.
        self._appends = TokenBucket(edits_per_s * 2, burst=10)
        self._pending: dict[str, _Edit] = {}
        self._flushers: dict[str, asyncio.Task[None]] = {}

    async def post(
        self, channel: str, thread_ts: str | None, text: str, blocks: list[dict] | None = None
    ) -> str:
        """Post a message (in a thread when `thread_ts`); returns its ts."""
        await self._posts[channel].take()
        response = await self.client.chat_postMessage(
            channel=channel,
            thread_ts=thread_ts,
            text=self.scrub.text(text),
            blocks=self.scrub.data(blocks),
        )
        return str(response["ts"])

    def edit(self, channel: str, ts: str, text: str, blocks: list[dict]) -> None:
        """Replace a message's content soon; a newer edit of it supersedes this one."""
        self._pending[ts] = _Edit(channel, ts, self.scrub.text(text), self.scrub.data(blocks))
        flusher = self._flushers.get(ts)
        if flusher is None or flusher.done():
            self._flushers[ts] = asyncio.create_task(self._flush(ts))

    async def settle(self, messages: Collection[str]) -> None:
        """Wait until the pending edits of these messages (by ts) have been sent; other
        threads' edits are not waited for."""
        while tasks := [t for ts, t in self._flushers.items() if ts in messages and not t.done()]:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def react(self, channel: str, ts: str, name: str) -> None:
        try:
            await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":
                log.warning("could not add :%s: to %s: %s", name, ts, exc.response.get("error"))

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        await self.client.chat_postEphemeral(
            channel=channel, user=user, text=self.scrub.text(text), thread_ts=thread_ts
        )

    async def upload(self, channel: str, thread_ts: str, files: list[dict[str, Any]]) -> None:
        """Attach files to a thread (files_upload_v2), their contents scrubbed."""
        clean = [{**f, "content": self.scrub.bytes(f["content"])} for f in files]
        await self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, file_uploads=clean)

    async def set_status(
        self, channel: str, thread_ts: str, status: str, loading: list[str] | None = None
    ) -> None:
        """The thread's status line ("is analyzing…"); "" clears it."""
        await self.client.assistant_threads_setStatus(
            channel_id=channel,
            thread_ts=thread_ts,
            status=self.scrub.text(status),
            loading_messages=[self.scrub.text(m) for m in loading] if loading else None,
        )

    async def start_stream(
        self, channel: str, thread_ts: str, recipient: tuple[str, str], chunks: list[dict]
    ) -> str:
        """Start a streamed reply in a thread, for (user, team); returns its ts."""
        await self._posts[channel].take()
        response = await self.client.chat_startStream(
            channel=channel,
            thread_ts=thread_ts,
            recipient_user_id=recipient[0],
            recipient_team_id=recipient[1],
            chunks=self.scrub.data(chunks),
            task_display_mode="plan",
        )
        return str(response["ts"])

    async def append_stream(self, channel: str, ts: str, chunks: list[dict]) -> None:
        await self._appends.take()
        await self.client.chat_appendStream(channel=channel, ts=ts, chunks=self.scrub.data(chunks))

    async def stop_stream(self, channel: str, ts: str, blocks: list[dict] | None) -> None:
        await self._appends.take()
        await self.client.chat_stopStream(channel=channel, ts=ts, blocks=self.scrub.data(blocks))

    async def _flush(self, ts: str) -> None:
        while edit := self._pending.pop(ts, None):
            await self._edits.take()
            try:
                await self.client.chat_update(
                    channel=edit.channel, ts=edit.ts, text=edit.text, blocks=edit.blocks
                )
            except SlackApiError as exc:  # progress is best effort; the answer is not
                log.warning("could not update message %s: %s", ts, exc.response.get("error"))
        self._flushers.pop(ts, None)
