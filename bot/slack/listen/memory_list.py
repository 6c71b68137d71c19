"""`/analyze memory`: the channel's notes in one message, each with who saved it and when,
and Forget. The saver and the operator's memory editors may forget a note; forgetting
takes effect on the next run. The list is drawn again after each press."""

from __future__ import annotations

from bot.slack.listen.policy import Policy
from bot.slack.render import memory_blocks
from bot.slack.threads import Click
from bot.slack.web import SlackWeb
from bot.store.base import Store

NOT_YOURS = "Only <@{saver}> or the memory editors can forget this note."
GONE = "That note is already forgotten."


class MemoryList:
    def __init__(self, web: SlackWeb, store: Store | None, policy: Policy) -> None:
        self.web, self.store, self.policy = web, store, policy

    async def show(self, team: str, channel: str) -> None:
        assert self.store is not None
        text, blocks = memory_blocks.listing(await self.store.notes(f"{team}:{channel}"))
        await self.web.post(channel, None, text, blocks)

    async def forget(self, team: str, note_id: str, click: Click, message_ts: str) -> None:
        assert self.store is not None
        place = f"{team}:{click.channel}"
        note = next((n for n in await self.store.notes(place) if n.id == note_id), None)
        refusal = self.policy.refusal(click.channel, click.user)
        if note is None:
            refusal = GONE
        elif refusal is None and click.user not in {note.saved_by, *self.policy.memory_editors}:
            refusal = NOT_YOURS.format(saver=note.saved_by)
        if refusal is not None:
            await self.web.ephemeral(click.channel, click.user, refusal, None)
            return
        await self.store.delete_note(place, note_id)
        text, blocks = memory_blocks.listing(await self.store.notes(place))
        await self.web.update(click.channel, message_ts, text, blocks)
