"""`/analyze schedules`: the channel's schedules in one message, each with its next firing,
state, owner and last result, and Pause or Resume and Delete. A schedule's owner and the
operator's schedule editors may press them; the list is drawn again after each press."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from bot.schedules.cadence import Cadence
from bot.slack.listen.policy import Policy
from bot.slack.render import schedule_blocks
from bot.slack.threads import Click, ThreadRef
from bot.slack.web import SlackWeb
from bot.store.base import NotFound, ScheduleRecord, Store

NOT_YOURS = "Only <@{owner}> or the schedule editors can change this schedule."
GONE = "That schedule is gone."
MONTH_FIRINGS = 800  # an hourly schedule's month and more: what the month's spend reads


class ScheduleList:
    def __init__(self, web: SlackWeb, store: Store | None, policy: Policy) -> None:
        self.web, self.store, self.policy = web, store, policy

    async def show(self, team: str, channel: str) -> None:
        """Post the channel's list there."""
        text, blocks = await self._drawn(team, channel)
        await self.web.post(channel, None, text, blocks)

    async def act(self, action: str, schedule_id: str, click: Click, message_ts: str) -> None:
        """Pause, resume or delete, then draw the list again in the same message."""
        assert self.store is not None
        schedule = await self.store.get_schedule(schedule_id) if schedule_id else None
        ref = ThreadRef.parse(schedule.key) if schedule else None
        if schedule is None or ref is None or ref.channel != click.channel:
            await self.web.ephemeral(click.channel, click.user, GONE, None)
            return
        if refusal := self._refusal(schedule, click):
            await self.web.ephemeral(click.channel, click.user, refusal, None)
            return
        try:
            if action == schedule_blocks.DELETE_ACTION:
                await self.store.delete_schedule(schedule_id)
            elif action == schedule_blocks.PAUSE_ACTION:
                why = f"paused by <@{click.user}>"
                await self.store.update_schedule(schedule_id, state="paused", paused_why=why)
            else:  # resumed: failures count again from none
                await self.store.update_schedule(
                    schedule_id, state="active", paused_why="", failures=0
                )
        except NotFound:
            await self.web.ephemeral(click.channel, click.user, GONE, None)
        text, blocks = await self._drawn(ref.team, click.channel)
        await self.web.update(click.channel, message_ts, text, blocks)

    def _refusal(self, schedule: ScheduleRecord, click: Click) -> str | None:
        if refusal := self.policy.refusal(click.channel, click.user):
            return refusal
        if click.user != schedule.owner and click.user not in self.policy.schedule_editors:
            return NOT_YOURS.format(owner=schedule.owner)
        return None

    async def _drawn(self, team: str, channel: str) -> tuple[str, list[dict[str, Any]]]:
        assert self.store is not None
        now = datetime.fromtimestamp(time.time(), UTC)
        month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()
        entries, spent = [], 0.0
        for schedule in await self.store.list_schedules():
            ref = ThreadRef.parse(schedule.key)
            if ref is None or (ref.team, ref.channel) != (team, channel):
                continue
            if schedule.state == "proposed":
                continue
            firings = await self.store.firings(schedule.id, limit=MONTH_FIRINGS)
            spent += sum(f.cost_usd for f in firings if f.fire_at >= month)
            result = (firings[0].outcome or "running") if firings else "not fired yet"
            words = Cadence(schedule.cron, schedule.zone).words(now)
            line = schedule_blocks.list_line(
                words, schedule.state, schedule.paused_why, schedule.owner, result,
                f"thread {ref.ts}",
            )  # fmt: skip
            entries.append((schedule.id, schedule.state, line))
        return schedule_blocks.listing(entries, spent)
