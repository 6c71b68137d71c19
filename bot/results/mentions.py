"""Text with no mention that would notify a crowd: Slack treats `<!here>`, `<!channel>`,
`<!everyone>` and `<!subteam^ID>` as such mentions in API posts, and plain `@channel` /
`@here` words too where names are linked. `<!…>` is escaped as Slack's mrkdwn escaping says
(`&lt;!…&gt;` shows as typed), and a bare `@channel` word gets a word joiner after its `@`
(it looks the same, and no longer matches). Every payload to Slack passes through it on its
way out (bot/slack/web/outgoing.py); results measure their text after it."""

from __future__ import annotations

import re

SPECIAL = re.compile(r"<!([^<>]*)(>?)")  # <!here>, <!subteam^S1|@team>, …, or an open one
CROWD_WORD = re.compile(r"(?<![\w@])@(channel|here|everyone|group)\b", re.IGNORECASE)
WORD_JOINER = "\u2060"


def inert(text: str) -> str:
    """`text` with no mention that notifies a channel or a user group."""
    if "<!" not in text and "@" not in text:  # most strings: no need for the patterns
        return text
    text = SPECIAL.sub(lambda m: f"&lt;!{m[1]}{'&gt;' if m[2] else ''}", text)
    return CROWD_WORD.sub(lambda m: f"@{WORD_JOINER}{m[1]}", text)
