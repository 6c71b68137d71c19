"""What the fake notices in the bot's posts that Slack would act on: mentions that notify a
crowd (`broadcasts`: `<!here>`, `<!channel>`, `<!everyone>`, `<!subteam^…>`, a bare
`@channel` / `@here` word, which Slack links under `link_names`, and rich_text `broadcast`
/ `usergroup` elements), and message posts that leave link previews on (`unfurled`:
`unfurl_links` and `unfurl_media` not both false). It only records; tests assert."""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

CROWD = re.compile(
    r"<!(?:here|channel|everyone|group)\b|<!subteam\^|(?<![\w@])@(?:channel|here|everyone)\b",
    re.IGNORECASE,
)
CROWD_ELEMENTS = frozenset({"broadcast", "usergroup"})
POSTING = frozenset({
    "chat.postMessage", "chat.postEphemeral", "chat.update", "chat.startStream",
    "chat.appendStream", "chat.stopStream", "assistant.threads.setStatus",
    "assistant.threads.setTitle", "assistant.threads.setSuggestedPrompts",
    "files.completeUploadExternal", "response_url",
})  # fmt: skip
UNFURLING = frozenset({"chat.postMessage", "chat.postEphemeral", "chat.update", "response_url"})
OFF = (False, "false", "0")


def broadcasts(value: Any) -> list[str]:
    """The crowd mentions anywhere in `value` (strings, and JSON held in strings)."""
    if isinstance(value, str):
        found = CROWD.findall(value)
        if value.startswith(("[", "{")):
            with contextlib.suppress(ValueError):  # blocks sent as a form field
                found += broadcasts(json.loads(value))
        return found
    if isinstance(value, list):
        return [m for v in value for m in broadcasts(v)]
    if isinstance(value, dict):
        own = [str(value["type"])] if value.get("type") in CROWD_ELEMENTS else []
        return own + [m for v in value.values() for m in broadcasts(v)]
    return []


def unfurls(method: str, args: dict[str, Any]) -> bool:
    """A message post that does not turn both link previews off."""
    off = all(args.get(k) in OFF for k in ("unfurl_links", "unfurl_media"))
    return method in UNFURLING and not off


class Outgoing:
    """The record; FakeSlack calls `note` with every Web API call and response_url post."""

    def __init__(self) -> None:
        self.broadcasts: list[tuple[str, str]] = []  # (method, the mention)
        self.unfurled: list[str] = []  # methods called with link previews left on

    def note(self, method: str, args: dict[str, Any]) -> None:
        if method in POSTING:
            self.broadcasts += [(method, m) for m in broadcasts(args)]
        if unfurls(method, args):
            self.unfurled.append(method)
