"""What the fake Slack's modules share: the JSON type and the API error they answer with."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


class SlackError(Exception):
    """Answered as ``{"ok": false, "error": error, **extra}`` with HTTP 200."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra
