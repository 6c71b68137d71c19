"""Scrubbing configured secrets out of everything that leaves the process.

The sandbox never gets a secret, so this is the second line: tool output, answers, Slack
messages, uploads and logs pass through it anyway.
"""

from __future__ import annotations

import logging
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
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if isinstance(value, dict):
            return {k: self.data(v) for k, v in value.items()}
        return value

    def bytes(self, value: bytes) -> bytes:
        for secret in self._secrets:
            value = value.replace(secret.encode(), REDACTED.encode())
        return value


class ScrubbingFilter(logging.Filter):
    """A logging filter that scrubs the formatted message (arguments included)."""

    def __init__(self, scrubber: Scrubber) -> None:
        super().__init__()
        self._scrubber = scrubber

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = self._scrubber.text(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True


NO_SECRETS = Scrubber([])
