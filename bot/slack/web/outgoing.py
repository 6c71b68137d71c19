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
from bot.scrub import NO_SECRETS, Scrubber, map_strings

CROWD_ELEMENTS = {"broadcast": "range", "usergroup": "usergroup_id"}


class Outgoing:
    """The scrubber and `inert`, over text and JSON-like data (blocks, chunks)."""

    def __init__(self, scrubber: Scrubber = NO_SECRETS) -> None:
        self.scrubber = scrubber

    def text(self, value: str) -> str:
        return inert(self.scrubber.text(value))

    def data(self, value: Any) -> Any:
        return map_strings(value, self.text, self._crowd_element)

    def _crowd_element(self, element: dict[str, Any]) -> dict[str, Any] | None:
        """A rich_text element that would notify a crowd, as plain text; None for others."""
        kind = element.get("type")
        if not (isinstance(kind, str) and kind in CROWD_ELEMENTS):
            return None
        said = f"@{WORD_JOINER}{element.get(CROWD_ELEMENTS[kind]) or 'group'}"
        return {"type": "text", "text": self.text(said)}

    def bytes(self, value: bytes) -> bytes:
        """A file's content: scrubbed only (a file notifies no one)."""
        return self.scrubber.bytes(value)
