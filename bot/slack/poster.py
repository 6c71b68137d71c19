"""Every write the bot makes to Slack, paced to stay inside Slack's rate tiers (pacing.py).

Posts go out in order, a few at once at most per channel; edits of one message are
coalesced (only the newest text is sent). A 429 that still comes (another process sharing
the workspace's limits, say) is waited out by the client's retry handler (Retry-After).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.scrub import NO_SECRETS, Scrubber
from bot.slack.outgoing import Outgoing
from bot.slack.pacing import OnWait, Pacer

log = logging.getLogger(__name__)

# What Slack answers where the bot cannot post: it is not in the channel (any more).
GONE = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
# No link previews: Slack fetches a link it unfurls, so an answer steered by a hostile file
# could send data to any server just by naming it. The SDK takes these on chat.postMessage;
# chat.postEphemeral and chat.update get them too (passed on as extra arguments).
NO_UNFURLS = {"unfurl_links": False, "unfurl_media": False}


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
        rate_scale: float = 1.0,
        scrubber: Scrubber = NO_SECRETS,
    ) -> None:
        self.client = client
        self.clean = Outgoing(scrubber)  # every payload passes it: secrets, crowd mentions
        self.pacer = Pacer(rate_scale)
        self._replied: dict[tuple[str, str], float] = {}  # thread -> its last reply from us
        self._background: set[asyncio.Task[None]] = set()  # reactions on their way
        self._pending: dict[str, _Edit] = {}
        self._flushers: dict[str, asyncio.Task[None]] = {}

    async def post(
        self, channel: str, thread_ts: str | None, text: str, blocks: list[dict] | None = None
    ) -> str:
        """Post a message (in a thread when `thread_ts`); returns its ts."""
        await self.pacer.take("chat.postMessage", channel)
        response = await self.client.chat_postMessage(
            channel=channel,
            thread_ts=thread_ts,
            text=self.clean.text(text),
            blocks=self.clean.data(blocks),
            **NO_UNFURLS,
        )
        self._reply(channel, thread_ts)
        return str(response["ts"])

    def replied_at(self, channel: str, thread_ts: str) -> float:
        """When the bot last posted in the thread (0 if never, in this process)."""
        return self._replied.get((channel, thread_ts), 0.0)

    def _reply(self, channel: str, thread_ts: str | None) -> None:
        if thread_ts:
            self._replied[(channel, thread_ts)] = time.monotonic()

    def edit(self, channel: str, ts: str, text: str, blocks: list[dict]) -> None:
        """Replace a message's content soon; a newer edit of it supersedes this one."""
        self._pending[ts] = _Edit(channel, ts, self.clean.text(text), self.clean.data(blocks))
        flusher = self._flushers.get(ts)
        if flusher is None or flusher.done():
            self._flushers[ts] = asyncio.create_task(self._flush(ts))

    async def settle(self, messages: Collection[str]) -> None:
        """Wait until the pending edits of these messages (by ts) have been sent; other
        threads' edits are not waited for."""
        while tasks := [t for ts, t in self._flushers.items() if ts in messages and not t.done()]:
            await asyncio.gather(*tasks, return_exceptions=True)

    def react(self, channel: str, ts: str, name: str) -> None:
        """Add a reaction soon, in the background: reactions share a workspace-wide tier (50
        a minute), and a question must not wait for its :eyes: before its run starts."""
        task = asyncio.create_task(self._react(channel, ts, name))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _react(self, channel: str, ts: str, name: str) -> None:
        await self.pacer.take("reactions.add")
        try:
            await self.client.reactions_add(channel=channel, timestamp=ts, name=name)
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":
                log.warning("could not add :%s: to %s: %s", name, ts, exc.response.get("error"))

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        await self.pacer.take("chat.postEphemeral")
        await self.client.chat_postEphemeral(
            channel=channel, user=user, text=self.clean.text(text), thread_ts=thread_ts,
            **NO_UNFURLS,
        )  # fmt: skip

    async def respond(self, response_url: str, text: str) -> None:
        """A private reply to a slash command through its response_url, which works even
        where the bot cannot post (a channel it is not in)."""
        webhook = AsyncWebhookClient(response_url, session=self.client.session)
        response = await webhook.send(
            text=self.clean.text(text), response_type="ephemeral", **NO_UNFURLS
        )
        if response.status_code != 200:
            log.warning("could not answer a slash command: HTTP %s", response.status_code)

    async def upload(
        self,
        channel: str,
        thread_ts: str,
        files: list[dict[str, Any]],
        on_wait: OnWait | None = None,
    ) -> None:
        """Attach files to a thread (files_upload_v2), their contents scrubbed. Slack shares
        them a moment later, and its answer names no message: this is no reply of ours
        that would clear the thread's status."""
        await self.pacer.take("files.upload", count=len(files) + 1, on_wait=on_wait)
        clean = [
            {**self.clean.data({k: v for k, v in f.items() if k != "content"}),
             "content": self.clean.bytes(f["content"])}
            for f in files
        ]  # fmt: skip
        await self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, file_uploads=clean)

    async def set_status(
        self, channel: str, thread_ts: str, status: str, loading: list[str] | None = None
    ) -> None:
        """The thread's status line ("is analyzing…"); "" clears it."""
        await self.client.assistant_threads_setStatus(
            channel_id=channel,
            thread_ts=thread_ts,
            status=self.clean.text(status),
            loading_messages=[self.clean.text(m) for m in loading] if loading else None,
        )

    async def start_stream(
        self,
        channel: str,
        thread_ts: str,
        recipient: tuple[str, str],
        chunks: list[dict],
    ) -> str:
        """Start a streamed reply in a thread, for (user, team); returns its ts. The stream
        calls are paced by their caller, which decides what to leave out while it waits."""
        response = await self.client.chat_startStream(
            channel=channel,
            thread_ts=thread_ts,
            recipient_user_id=recipient[0],
            recipient_team_id=recipient[1],
            chunks=self.clean.data(chunks),
            task_display_mode="plan",
        )
        self._reply(channel, thread_ts)
        return str(response["ts"])

    async def append_stream(self, channel: str, ts: str, chunks: list[dict]) -> None:
        await self.client.chat_appendStream(channel=channel, ts=ts, chunks=self.clean.data(chunks))

    async def stop_stream(
        self,
        channel: str,
        ts: str,
        chunks: list[dict],
        blocks: list[dict] | None,
    ) -> None:
        """End a stream with its last `chunks` and `blocks` at the bottom."""
        await self.client.chat_stopStream(
            channel=channel,
            ts=ts,
            chunks=self.clean.data(chunks) or None,
            blocks=self.clean.data(blocks),
        )

    async def set_title(self, channel: str, thread_ts: str, title: str) -> None:
        """A DM thread's title (agent and assistant views)."""
        await self.pacer.take("assistant.threads.setTitle")
        await self.client.assistant_threads_setTitle(
            channel_id=channel, thread_ts=thread_ts, title=self.clean.text(title)
        )

    async def suggest(self, channel: str, thread_ts: str | None, prompts: list[dict]) -> None:
        """Suggested prompts for a DM (pinned to its Messages tab without `thread_ts`)."""
        await self.pacer.take("assistant.threads.setSuggestedPrompts")
        await self.client.assistant_threads_setSuggestedPrompts(
            channel_id=channel, thread_ts=thread_ts, prompts=self.clean.data(prompts)
        )

    async def _flush(self, ts: str) -> None:
        while edit := self._pending.pop(ts, None):
            await self.pacer.take("chat.update")
            try:
                await self.client.chat_update(
                    channel=edit.channel, ts=edit.ts, text=edit.text, blocks=edit.blocks,
                    **NO_UNFURLS,
                )  # fmt: skip
            except SlackApiError as exc:  # progress is best effort; the answer is not
                log.warning("could not update message %s: %s", ts, exc.response.get("error"))
        self._flushers.pop(ts, None)
