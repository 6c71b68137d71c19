"""A note the model proposed (its `propose_note` call) after a correction, shown to the person
who asked with a Save button; saving is listen/channel_memory.py's."""

from __future__ import annotations

import json

from bot.slack.render import memory_blocks
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb


class NoteProposals:
    def __init__(self, web: SlackWeb) -> None:
        self._web = web

    async def propose(self, ref: ThreadRef, asker: str, call_input: str) -> None:
        try:
            text = str(json.loads(call_input)["text"]).strip()
        except (ValueError, KeyError, TypeError):
            return  # the tool refused it already
        if text:
            said, blocks = memory_blocks.proposal(text, asker)
            await self._web.post(ref.channel, ref.ts, said, blocks)
