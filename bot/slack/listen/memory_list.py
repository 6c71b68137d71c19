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

NOT_YOURS = "Only <@{saver}> or the memory editors can forget this {what}."
GONE = "That {what} is already forgotten."


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

    async def forget(
        self, team: str, action_id: str, value: str, click: Click, message_ts: str
    ) -> None:
        """Forget a note (by id) or a saved definition (by name): its saver and the memory
        editors may."""
        assert self.store is not None
        place = f"{team}:{click.channel}"
        definition = action_id.startswith(memory_blocks.FORGET_DEFINITION_ACTION)
        if definition:
            savers = {d.name: d.saved_by for d in await self.store.definitions(place)}
        else:
            savers = {n.id: n.saved_by for n in await self.store.notes(place)}
        saver, what = savers.get(value), "definition" if definition else "note"
        refusal = self.policy.refusal(click.channel, click.user)
        if saver is None:
            refusal = GONE.format(what=what)
        elif refusal is None and click.user not in {saver, *self.policy.memory_editors}:
            refusal = NOT_YOURS.format(saver=saver, what=what)
        if refusal is not None:
            await self.web.ephemeral(click.channel, click.user, refusal, None)
            return
        forget = self.store.delete_definition if definition else self.store.delete_note
        await forget(place, value)
        text, blocks = await self._drawn(place)
        await self.web.update(click.channel, message_ts, text, blocks)
