"""What every payload to Slack passes through on its way out (web.py): configured secrets
scrubbed, then every mention that would notify a crowd made inert.

Text the bot posts comes from users (their questions, file names), files and the model, and
a hostile CSV can steer the model: none of it may ping a channel. Slack treats `<!here>`,
`<!channel>`, `<!everyone>` and `<!subteam^ID>` (user groups) as such mentions in API
posts, and plain `@channel` / `@here` words too where names are linked (`link_names`,
`parse=full`). The stricter reading is applied everywhere, whatever the field: `<!…>` is
escaped as Slack's mrkdwn escaping says (`&lt;!…&gt;` shows as typed), a bare `@channel`
word gets a word joiner after its `@` (it looks the same, and no longer matches), and
rich_text `broadcast` / `usergroup` elements become plain text.
"""

from __future__ import annotations

from typing import Any

from bot.results.mentions import WORD_JOINER, inert
from bot.scrub import NO_SECRETS, Scrubber

CROWD_ELEMENTS = {"broadcast": "range", "usergroup": "usergroup_id"}


class Outgoing:
    """The scrubber and `inert`, over text and JSON-like data (blocks, chunks)."""

    def __init__(self, scrubber: Scrubber = NO_SECRETS) -> None:
        self.scrubber = scrubber

    def text(self, value: str) -> str:
        return inert(self.scrubber.text(value))

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if isinstance(value, dict):
            kind = value.get("type")
            if isinstance(kind, str) and kind in CROWD_ELEMENTS:
                said = f"@{WORD_JOINER}{value.get(CROWD_ELEMENTS[kind]) or 'group'}"
                return {"type": "text", "text": self.text(said)}
            return {k: self.data(v) for k, v in value.items()}
        return value

    def bytes(self, value: bytes) -> bytes:
        """A file's content: scrubbed only (a file notifies no one)."""
        return self.scrubber.bytes(value)
