"""What the fake Slack's modules share: the JSON type, the API error they answer with, and
small helpers for ids, timestamps and arguments."""

from __future__ import annotations

import copy
import json
import secrets
import string
from typing import Any

Json = dict[str, Any]
TEAM_DOMAIN = "fake-ws"


class Message(dict[str, Any]):
    """A stored message: Slack's own fields, plus where it lives, its earlier versions and
    the link-preview flags it was posted with (a bot post's defaults: links off, media on)."""

    def __init__(self, channel: str, fields: Json) -> None:
        super().__init__(fields)
        self.channel = channel
        self.history: list[Json] = []  # earlier versions, oldest first (chat.update)
        self.unfurl_links = False
        self.unfurl_media = True

    @property
    def versions(self) -> list[Json]:
        """Every version of the message, the current one last."""
        return [*self.history, copy.deepcopy(dict(self))]


class SlackError(Exception):
    """Answered as ``{"ok": false, "error": error, **extra}`` with HTTP 200."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


def random_id(n: int, alphabet: str = string.ascii_uppercase + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def ts_key(ts: str) -> tuple[int, int]:
    """A ``"<epoch>.<6 digits>"`` timestamp as numbers, for ordering."""
    sec, _, frac = str(ts).partition(".")
    try:
        return int(sec or 0), int((frac + "000000")[:6])
    except ValueError:
        return 0, 0


def flag(value: Any) -> bool:
    """A boolean argument: JSON true, or "1"/"true" in a query string or form."""
    return value is True or str(value).lower() in ("1", "true")


def json_arg(args: Json, key: str, error: str = "invalid_arguments") -> Any:
    """A structured argument; form and query values carry it as a JSON string."""
    value = args.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackError(error) from None
    return value


def channel_type(channel: str) -> str:
    return {"D": "im", "G": "group"}.get(channel[:1], "channel")
