"""Slack's error codes, read once (in the seam, `web.py`) into the bot's own types.

Everything else in `bot/slack` catches these, never the SDK's error: what a code means
(the bot left the channel, the workspace lacks a feature, a stream has ended) is decided
here alone. They are not `BotError`s: their text is Slack's, not meant for users.
"""

from __future__ import annotations

# The bot cannot post where it was: not in the channel (any more), or the channel is gone.
GONE = frozenset({"not_in_channel", "channel_not_found", "is_archived"})
# A workspace without the feature (or the token without the scopes) answers these.
REFUSED = frozenset(
    {
        "not_allowed_token_type",
        "missing_scope",
        "feature_not_enabled",
        "feature_disabled",  # agent sessions
        "not_allowed",
        "unknown_method",
        "method_not_supported_for_channel_type",
        "team_not_allowed",
    }
)
# A streamed message that takes no more: Slack ended it, or someone pressed its stop.
CLOSED = frozenset({"message_not_in_streaming_state", "stopped_by_user", "message_not_found"})
# Slack busy, not a verdict on the request.
BUSY = frozenset({"ratelimited", "fatal_error", "internal_error", "service_unavailable"})
BUSY_STATUS = frozenset({429, 500, 502, 503, 504})


class SlackError(Exception):
    """A Web API call Slack refused. `code` is Slack's error ("" when the answer was not
    Slack's: a proxy's page, say), `status` the HTTP status."""

    def __init__(self, method: str, code: str, status: int, messages: tuple[str, ...] = ()) -> None:
        super().__init__(f"{method}: {code or f'HTTP {status}'}")
        self.method, self.code, self.status = method, code, status
        self.messages = messages  # response_metadata.messages: what a block broke, and where


class SlackGone(SlackError):
    """The bot can no longer post in the channel."""


class SlackRefused(SlackError):
    """The workspace or the token does not allow this (agent features, scopes)."""


class StreamClosed(SlackError):
    """The streamed message is no longer streaming."""

    @property
    def by_user(self) -> bool:
        """Someone pressed Slack's own stop on the message."""
        return self.code == "stopped_by_user"


class SlackMalformed(SlackError):
    """Slack found the request malformed (`invalid_*`)."""


class SlackBusy(SlackError):
    """Rate-limited or down for now (after the client's own retries)."""


def slack_error(method: str, code: str, status: int, messages: tuple[str, ...] = ()) -> SlackError:
    """The bot's type for Slack's answer `code` (HTTP `status`) to `method`."""
    if code in GONE:
        kind: type[SlackError] = SlackGone
    elif code in REFUSED:
        kind = SlackRefused
    elif code in CLOSED:
        kind = StreamClosed
    elif code in BUSY or status in BUSY_STATUS:
        kind = SlackBusy
    elif code.startswith("invalid_"):
        kind = SlackMalformed
    else:
        kind = SlackError
    return kind(method, code, status, messages)
