"""A run's streamed message (chat.startStream / appendStream / stopStream), and where its
text goes when the stream cannot take it: Slack may end a stream early
(`message_not_in_streaming_state`), and one message holds at most 12,000 characters of
markdown, so the rest of an answer continues in ordinary messages; no text is lost."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.slack import render
from bot.slack.poster import SlackPoster

log = logging.getLogger(__name__)

STREAM_MARKDOWN_MAX = 11_500  # of Slack's 12,000 per message, with room to spare
PIECE = 2_000  # characters per appendStream, so the answer arrives as it is read
ENDED = frozenset({"message_not_in_streaming_state", "stopped_by_user", "message_not_found"})


class LiveMessage:
    def __init__(self, poster: SlackPoster, channel: str, thread_ts: str, ts: str) -> None:
        self._poster = poster
        self._channel, self._thread_ts, self.ts = channel, thread_ts, ts
        self.open = True
        self._markdown = 0  # characters streamed so far
        self._rest: list[str] = []  # text for messages after the stream

    async def update(self, chunks: list[dict[str, Any]]) -> None:
        """Task and plan changes; dropped once the stream has ended (the status line and
        the answer still say what happened)."""
        if self.open:
            await self._append(chunks)

    async def write(self, text: str) -> None:
        """Markdown, streamed in pieces while the stream lasts and has room."""
        for start in range(0, len(text), PIECE):
            piece = text[start : start + PIECE]
            fits = self._markdown + len(piece) <= STREAM_MARKDOWN_MAX
            if self._rest or not self.open or not fits:
                self._rest.append(text[start:])
                return
            if not await self._append([{"type": "markdown_text", "text": piece}]):
                self._rest.append(text[start:])
                return
            self._markdown += len(piece)

    async def finish(self, blocks: list[dict[str, Any]]) -> None:
        """End the stream with `blocks` under it, or under the last message after it."""
        rest = "".join(self._rest)
        if self.open:
            self.open = False
            try:
                await self._poster.stop_stream(self._channel, self.ts, None if rest else blocks)
                if not rest:
                    return
            except SlackApiError as exc:
                _log_unless_ended(exc, "stop")
        await self._post_rest(rest, blocks)

    async def _post_rest(self, rest: str, blocks: list[dict[str, Any]]) -> None:
        parts = render.answer_parts(rest) if rest.strip() else []
        for i, part in enumerate(parts):
            last = blocks if i == len(parts) - 1 else []
            body = [{"type": "markdown", "text": part}, *last]
            await self._poster.post(self._channel, self._thread_ts, part[:3000], body)
        if not parts and blocks:
            await self._poster.post(self._channel, self._thread_ts, "Done", blocks)

    async def _append(self, chunks: list[dict[str, Any]]) -> bool:
        try:
            await self._poster.append_stream(self._channel, self.ts, chunks)
            return True
        except SlackApiError as exc:
            _log_unless_ended(exc, "append to")
            self.open = False
            return False


def _log_unless_ended(exc: SlackApiError, what: str) -> None:
    error = exc.response.get("error")
    if error not in ENDED:
        log.warning("could not %s a streamed message: %s", what, error)
