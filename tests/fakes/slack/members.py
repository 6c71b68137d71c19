"""Which conversations the bot is a member of, in the fake Slack.

The bot is in every conversation unless a test says otherwise (``FakeSlack(outside=...)`` or
``remove_bot``). Slack sends no message events from a conversation the bot is not in
(slack-platform.md §3.3), and the methods that read or write one answer ``not_in_channel``.
The doc names that error for ``chat.postMessage`` and ``chat.postEphemeral`` (§6.1); the fake
answers it for every method below, which Slack is observed to do for uploads and history and
which is the stricter reading for the rest. A DM with the bot always has it as a member.
"""

from __future__ import annotations

from collections.abc import Iterable

from tests.fakes.slack.common import Json, SlackError

# method -> the argument naming its conversation
CONVERSATION_ARG = {
    "chat.postMessage": "channel",
    "chat.postEphemeral": "channel",
    "chat.update": "channel",
    "chat.delete": "channel",
    "reactions.add": "channel",
    "reactions.remove": "channel",
    "conversations.replies": "channel",
    "files.completeUploadExternal": "channel_id",
    "assistant.threads.setStatus": "channel_id",
    "assistant.threads.setTitle": "channel_id",
    "assistant.threads.setSuggestedPrompts": "channel_id",
    "chat.startStream": "channel",
    "chat.appendStream": "channel",
    "chat.stopStream": "channel",
}


class Membership:
    def __init__(self, outside: Iterable[str] = ()) -> None:
        self.outside = set(outside)  # conversations the bot is not in

    def __contains__(self, channel: str) -> bool:
        return channel.startswith("D") or channel not in self.outside

    def check(self, method: str, args: Json) -> None:
        """``not_in_channel`` for a call about a conversation the bot is not in."""
        arg = CONVERSATION_ARG.get(method)
        channels = [str(args.get(arg) or "")] if arg else []
        if method == "files.completeUploadExternal":
            channels += str(args.get("channels") or "").split(",")
        if any(c and c not in self for c in channels):
            raise SlackError("not_in_channel")
