"""A run's streamed message (chat.startStream / appendStream / stopStream).

Changes queue up and go out together: the first with the stream's start, then at most one
call every `every_s` (appendStream is Tier 4: 100 a minute for the whole workspace), and the
last ones with the answer in chat.stopStream. Slack may end a stream early
(`message_not_in_streaming_state`), and a message holds 12,000 characters of markdown, so
what does not fit continues in ordinary messages after it; no text of the answer is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.slack import markdown_split
from bot.slack.pacing import OnWait
from bot.slack.poster import SlackPoster
from bot.slack.threads import ThreadRef

log = logging.getLogger(__name__)

STREAM_MARKDOWN_MAX = 11_500  # of Slack's 12,000 per message, with room to spare
FLUSH_EVERY_S = 2.0
ENDED = frozenset({"message_not_in_streaming_state", "stopped_by_user", "message_not_found"})

Chunk = dict[str, Any]


class LiveMessage:
    def __init__(
        self,
        poster: SlackPoster,
        ref: ThreadRef,
        recipient: str,
        *,
        every_s: float = FLUSH_EVERY_S,
        on_wait: OnWait | None = None,
    ) -> None:
        self._poster, self._ref, self._recipient = poster, ref, recipient
        self._every_s, self._on_wait = every_s, on_wait
        self.ts: str | None = None
        self.open = False  # the stream takes chunks
        self._queue: list[Chunk] = []
        self._markdown = 0  # characters streamed so far
        self._last = 0.0  # when the last call went out
        self._flusher: asyncio.Task[None] | None = None
        self._sending = False  # the flusher's call is on the wire: let it land

    async def start(self, chunks: list[Chunk]) -> None:
        """Start the stream with `chunks`; a refusal raises SlackApiError."""
        self.ts = await self._poster.start_stream(
            self._ref.channel,
            self._ref.ts,
            (self._recipient, self._ref.team),
            _merged(chunks),
            self._on_wait,
        )
        self.open, self._last = True, time.monotonic()

    def add(self, chunks: list[Chunk]) -> None:
        """Task and plan changes, sent soon; dropped once the stream has ended (the
        answer still says what happened)."""
        if not self.open:
            return
        self._queue += chunks
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())

    async def finish(self, text: str, blocks: list[Chunk]) -> None:
        """End the stream with `text` (markdown) and `blocks` at the bottom; what does not
        fit continues in further messages, `blocks` under the last."""
        await self._stop_flusher()
        room = STREAM_MARKDOWN_MAX - self._markdown if self.open else 0
        first, *rest = markdown_split.split(text, first_max=room) if text else [""]
        if self.open:
            self.open = False
            chunks = self._queue + ([{"type": "markdown_text", "text": first}] if first else [])
            try:
                await self._poster.stop_stream(
                    self._ref.channel, str(self.ts), _merged(chunks), None if rest else blocks
                )
            except SlackApiError as exc:
                _log_unless_ended(exc, "stop")
                rest = [first, *rest]
        else:
            rest = [first, *rest]
        await self._post(rest, blocks)

    async def _post(self, parts: list[str], blocks: list[Chunk]) -> None:
        parts = [p for p in parts if p.strip()]
        for i, part in enumerate(parts):
            last = blocks if i == len(parts) - 1 else []
            body = [{"type": "markdown", "text": part}, *last]
            await self._poster.post(self._ref.channel, self._ref.ts, part[:3000], body)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(max(0.0, self._last + self._every_s - time.monotonic()))
        chunks, self._queue = _merged(self._queue), []
        if not chunks or not self.open:
            return
        self._last, self._sending = time.monotonic(), True
        try:
            await self._poster.append_stream(self._ref.channel, str(self.ts), chunks, self._on_wait)
        except SlackApiError as exc:
            _log_unless_ended(exc, "append to")
            self.open = False
        finally:
            self._sending = False

    async def _stop_flusher(self) -> None:
        if self._flusher is None or self._flusher.done():
            return
        if not self._sending:
            self._flusher.cancel()  # still waiting: its chunks go with the stop instead
        with contextlib.suppress(asyncio.CancelledError):
            await self._flusher


def _merged(chunks: list[Chunk]) -> list[Chunk]:
    """Several updates of one task as one (later fields win), where it first appeared."""
    merged: list[Chunk] = []
    tasks: dict[str, Chunk] = {}
    for chunk in chunks:
        if chunk.get("type") == "task_update" and chunk["id"] in tasks:
            tasks[chunk["id"]].update(chunk)
            continue
        chunk = dict(chunk)
        if chunk.get("type") == "task_update":
            tasks[chunk["id"]] = chunk
        merged.append(chunk)
    return merged


def _log_unless_ended(exc: SlackApiError, what: str) -> None:
    error = exc.response.get("error")
    if error not in ENDED:
        log.warning("could not %s a streamed message: %s", what, error)
