"""`/analyze memory`: the channel's notes in one message, each with who saved it and when,
and Forget. The saver and the operator's memory editors may forget a note; forgetting
takes effect on the next run. The list is drawn again after each press."""

from __future__ import annotations

from typing import Any

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
        text, blocks = await self._drawn(f"{team}:{channel}")
        await self.web.post(channel, None, text, blocks)

    async def _drawn(self, place: str) -> tuple[str, list[dict[str, Any]]]:
        assert self.store is not None
        notes, definitions = await self.store.notes(place), await self.store.definitions(place)
        return memory_blocks.listing(notes, definitions)

    async def forget_definition(self, team: str, name: str, click: Click, message_ts: str) -> None:
        """Forget a saved definition: its saver and the memory editors may."""
        assert self.store is not None
        place = f"{team}:{click.channel}"
        found = next((d for d in await self.store.definitions(place) if d.name == name), None)
        refusal = self.policy.refusal(click.channel, click.user)
        if found is None:
            refusal = GONE
        elif refusal is None and click.user not in {found.saved_by, *self.policy.memory_editors}:
            refusal = NOT_YOURS.format(saver=found.saved_by).replace("note", "definition")
        if refusal is not None:
            await self.web.ephemeral(click.channel, click.user, refusal, None)
            return
        await self.store.delete_definition(place, name)
        text, blocks = await self._drawn(place)
        await self.web.update(click.channel, message_ts, text, blocks)

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
        text, blocks = await self._drawn(place)
        await self.web.update(click.channel, message_ts, text, blocks)
