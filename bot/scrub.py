"""Scrubbing configured secrets out of everything that leaves the process.

The sandbox never gets a secret, so this is the second line: tool output, answers, Slack
messages, uploads and logs pass through it anyway.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 8  # shorter values would redact ordinary words


class Scrubber:
    def __init__(self, secrets: list[str]) -> None:
        # Longest first, so a secret containing another is replaced whole.
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len)[::-1]

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def data(self, value: Any) -> Any:
        """The same, through JSON-like data (Slack blocks)."""
        return map_strings(value, self.text)

    def bytes(self, value: bytes) -> bytes:
        for secret in self._secrets:
            value = value.replace(secret.encode(), REDACTED.encode())
        return value

    @property
    def has_secrets(self) -> bool:
        return bool(self._secrets)

    def stream(self) -> ByteStream:
        """A scrubber of one byte stream fed in pieces (a secret may span two)."""
        return ByteStream([s.encode() for s in self._secrets])


class ByteStream:
    """Scrubs a stream chunk by chunk; holds back at most the longest secret's length less
    one byte, in case a secret begins there."""

    def __init__(self, secrets: list[bytes]) -> None:
        self._pattern = re.compile(b"|".join(map(re.escape, secrets))) if secrets else None
        self._hold = max(map(len, secrets), default=1) - 1
        self._carry = b""

    def feed(self, chunk: bytes) -> bytes:
        if self._pattern is None:
            return chunk
        data = self._carry + chunk
        cut = len(data) - self._hold  # a match starting before it lies wholly in `data`
        out, pos = [], 0
        for match in self._pattern.finditer(data):
            if match.start() >= cut:
                break
            out += [data[pos : match.start()], REDACTED.encode()]
            pos = match.end()
        end = max(cut, pos)
        out.append(data[pos:end])
        self._carry = data[end:]
        return b"".join(out)

    def end(self) -> bytes:
        """What was held back, scrubbed."""
        rest, self._carry = self._carry, b""
        return self._pattern.sub(REDACTED.encode(), rest) if self._pattern else rest


# Token-shaped strings, scrubbed from logs even when not configured here (a token another
# service echoed back, one pasted into a thread): Slack's bot, user, app and refresh tokens,
# Anthropic keys, and bearer tokens or access_token parameters (how Buddy's are sent).
TOKEN_SHAPES = re.compile(
    r"\b(?:xox[abeprso]|xapp)-[A-Za-z0-9-]{6,}"
    r"|\bsk-ant-[A-Za-z0-9_-]{6,}"
    r"|(?<=[Bb]earer )[A-Za-z0-9._~+/=-]{8,}"
    r"|(?<=access_token=)[^&\s\"']{8,}"
)


def map_strings(
    value: Any,
    text: Callable[[str], str],
    replace: Callable[[dict[str, Any]], Any] | None = None,
) -> Any:
    """JSON-like data with `text` applied to every string value in it (keys are kept).
    `replace` may stand in for a whole object first: what it returns, unless None."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [map_strings(v, text, replace) for v in value]
    if isinstance(value, dict):
        if replace is not None and (instead := replace(value)) is not None:
            return instead
        return {k: map_strings(v, text, replace) for k, v in value.items()}
    return value


def scrub_tokens(value: str) -> str:
    return TOKEN_SHAPES.sub(REDACTED, value)


class ScrubbingFilter(logging.Filter):
    """A handler filter that scrubs the whole record: the message with its arguments, the
    traceback and the stack, of the configured secrets and of token-shaped strings.

    The traceback is rendered here and the exception dropped from the record, so no formatter
    down the line can render the unscrubbed one again."""

    def __init__(self, scrubber: Scrubber) -> None:
        super().__init__()
        self._scrubber = scrubber
        self._formatter = logging.Formatter()

    def scrub(self, value: str) -> str:
        return scrub_tokens(self._scrubber.text(value))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # bad arguments: logging reports those itself, unscrubbed
            message = f"{record.msg!r} % {record.args!r}"
        record.msg, record.args = self.scrub(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        record.exc_info = None
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self.scrub(record.stack_info)
        return True


def install_log_scrubbing(scrubber: Scrubber, logger: logging.Logger | None = None) -> None:
    """Scrub every record each handler of `logger` (the root one by default) writes; once per
    handler however often it is called."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
            handler.addFilter(ScrubbingFilter(scrubber))


NO_SECRETS = Scrubber([])
