"""A run's streamed message (chat.startStream / appendStream / stopStream).

Slack is never waited on by the run: changes queue up and a background flusher sends them
together, the first with the stream's start, then at most one call every `every_s`
(appendStream is Tier 4: 100 a minute for the whole workspace), and the last ones with
the answer in chat.stopStream. A run that ends before its stream could start (Tier 2 allows
20 starts a minute per workspace) is answered in a plain message instead.

Someone may press Slack's own stop on the message: the next call answers
`stopped_by_user`, and `on_stopped` hears of it. Slack may end a stream early
(`message_not_in_streaming_state`), and a message holds
12,000 characters of markdown, so what does not fit continues in ordinary messages after
it; no text of the answer is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bot.slack.render import block_kit, markdown_split, stream_chunks
from bot.slack.threads import ThreadRef
from bot.slack.web.client import SlackWeb
from bot.slack.web.errors import SlackError, SlackGone, SlackRefused, StreamClosed
from bot.slack.web.pacing import OnWait

log = logging.getLogger(__name__)

STREAM_MARKDOWN_MAX = 11_500  # of Slack's 12,000 per message, with room to spare
FLUSH_EVERY_S = 2.0

Chunk = dict[str, Any]


class LiveMessage:
    def __init__(
        self,
        web: SlackWeb,
        ref: ThreadRef,
        recipient: str,
        opening: list[Chunk],
        *,
        every_s: float = FLUSH_EVERY_S,
        on_wait: OnWait | None = None,
        on_stopped: Callable[[], None] | None = None,
    ) -> None:
        self._web, self._ref, self._recipient = web, ref, recipient
        self._every_s, self._on_wait, self._on_stopped = every_s, on_wait, on_stopped
        self.ts: str | None = None
        self.open = False  # the stream takes chunks
        self.refused: str | None = None  # the workspace's error, when it refused the stream
        self.gone: SlackGone | None = None  # Slack's answer: the bot left the channel
        self._queue: list[Chunk] = list(opening)
        self._last = 0.0  # when the last call went out
        self._flusher: asyncio.Task[None] | None = None
        self._sending = False  # the flusher's call is on the wire: let it land
        self._ended = False

    @property
    def starting(self) -> bool:
        """The stream's start is asked for but not made yet (waiting its turn, say)."""
        return self.ts is None and self._flusher is not None and not self._flusher.done()

    def add(self, chunks: list[Chunk]) -> None:
        """Task and plan changes, sent soon (the first starts the stream); dropped once the
        stream has ended (the answer still says what happened)."""
        if self._ended or self.refused or (self.ts is not None and not self.open):
            return
        self._queue += chunks
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())

    def abandon(self) -> None:
        """The channel is gone: nothing more is sent."""
        self._ended = True
        if self._flusher is not None:
            self._flusher.cancel()

    async def finish(
        self, text: str, blocks: list[Chunk], notes: list[str], session_status: str | None = None
    ) -> bool:
        """End with `text` (markdown) and `blocks` at the bottom; what does not fit
        continues in further messages, `blocks` under the last. Without a stream, `notes`
        (what the opening tasks said) and the text go out as plain messages. With
        `session_status`, the stream's stop moves the thread's agent session to it: True
        when it did (a stream Slack ended, or none, leaves that to the caller)."""
        self._ended = True
        # cleaned whole before it is cut: a secret or a mention across a cut is still caught
        text = self._web.clean.text(text)
        await self._settle()
        if self.ts is None:
            for note in notes:
                await self._web.post(self._ref.channel, self._ref.ts, note)
            await self._post(markdown_split.split(text), blocks)
            return False
        rest = markdown_split.split(text)
        carried = False
        if self.open:
            first, *rest = markdown_split.split(text, first_max=STREAM_MARKDOWN_MAX)
            chunks = self._queue + ([stream_chunks.markdown_chunk(first)] if first else [])
            await self._web.pace("chat.stopStream", self._on_wait)
            self.open = False
            try:
                await self._web.stop_stream(
                    self._ref.channel,
                    self.ts,
                    stream_chunks.merged(chunks),
                    None if rest else blocks,
                    session_status,
                )
                carried = session_status is not None
                if not rest:
                    return carried
            except SlackError as exc:
                _log_unless_ended(exc, "stop")  # Slack's stop on it: the rest goes as posts
                rest = [first, *rest]
        await self._post(rest, blocks)
        return carried

    async def _post(self, parts: list[str], blocks: list[Chunk]) -> None:
        for text, body in block_kit.markdown_posts(parts, blocks):
            await self._web.post(self._ref.channel, self._ref.ts, text, body)

    async def _flush(self) -> None:
        if self.ts is None:
            await self._web.pace("chat.startStream", self._on_wait)
            await self._send(self._start)
        else:
            await asyncio.sleep(max(0.0, self._last + self._every_s - time.monotonic()))
            await self._web.pace("chat.appendStream", self._on_wait)
            await self._send(self._append)

    async def _send(self, call: Callable[[list[Chunk]], Awaitable[None]]) -> None:
        chunks, self._queue = stream_chunks.merged(self._queue), []
        if not chunks:
            return
        self._last, self._sending = time.monotonic(), True
        try:
            await call(chunks)
        except SlackError as exc:
            if self.ts is None and isinstance(exc, SlackRefused):
                self.refused = exc.code
            elif isinstance(exc, StreamClosed) and exc.by_user and self._on_stopped is not None:
                self._on_stopped()  # someone pressed Slack's own stop on the message
            elif isinstance(exc, SlackGone):
                self.gone = exc  # for the run's next event to raise (see SlackRunView)
            else:
                _log_unless_ended(exc, "start" if self.ts is None else "append to")
            self.open = False
        finally:
            self._sending = False

    async def _start(self, chunks: list[Chunk]) -> None:
        recipient = (self._recipient, self._ref.team)
        self.ts = await self._web.start_stream(self._ref.channel, self._ref.ts, recipient, chunks)
        self.open = True

    async def _append(self, chunks: list[Chunk]) -> None:
        await self._web.append_stream(self._ref.channel, str(self.ts), chunks)

    async def _settle(self) -> None:
        """No flusher left: one on the wire lands, one still waiting is dropped (its
        chunks go with the stop, or the stream never starts)."""
        if self._flusher is None or self._flusher.done():
            return
        if not self._sending:
            self._flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._flusher


def _log_unless_ended(exc: SlackError, what: str) -> None:
    if not isinstance(exc, StreamClosed):
        log.warning("could not %s a streamed message: %s", what, exc.code)
