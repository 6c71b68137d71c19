"""Confirm and Cancel under a proposed schedule. Only the person who asked may confirm, under
the same access rules as every run; the owner and the operator's schedule editors may
cancel. Any replica answers: the proposal is in the store."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bot.schedules.cadence import Cadence
from bot.slack.listen.policy import Policy
from bot.slack.render import schedule_blocks
from bot.slack.render.block_kit import section
from bot.slack.threads import Click, ThreadRef
from bot.slack.web import SlackWeb
from bot.store.base import NotFound, ScheduleRecord, Store

GONE = "That schedule is no longer waiting for confirmation."
NOT_OWNER = "Only <@{owner}> can confirm this schedule."
NOT_YOURS = "Only <@{owner}> or the schedule editors can cancel this schedule."


class ScheduleButtons:
    def __init__(self, web: SlackWeb, store: Store | None, policy: Policy) -> None:
        self.web, self.store, self.policy = web, store, policy

    async def confirm(self, schedule_id: str, click: Click, message_ts: str) -> None:
        schedule = await self._proposed(schedule_id, click)
        if schedule is None:
            return
        if click.user != schedule.owner:
            await self._tell(click, NOT_OWNER.format(owner=schedule.owner))
            return
        if refusal := self.policy.refusal(click.channel, click.user):
            await self._tell(click, refusal)
            return
        assert self.store is not None
        try:
            await self.store.update_schedule(schedule_id, state="active")
        except NotFound:
            await self._tell(click, GONE)
            return
        now = datetime.fromtimestamp(time.time(), UTC)
        words = Cadence(schedule.cron, schedule.zone).words(now)
        text = schedule_blocks.confirmed(words, schedule.question, click.user)
        await self.web.update(click.channel, message_ts, text, [section(text)])

    async def cancel(self, schedule_id: str, click: Click, message_ts: str) -> None:
        schedule = await self._proposed(schedule_id, click)
        if schedule is None:
            return
        if click.user != schedule.owner and click.user not in self.policy.schedule_editors:
            await self._tell(click, NOT_YOURS.format(owner=schedule.owner))
            return
        assert self.store is not None
        await self.store.delete_schedule(schedule_id)
        text = schedule_blocks.cancelled(click.user)
        await self.web.update(click.channel, message_ts, text, [section(text)])

    async def retry(self, value: str, click: Click, message_ts: str) -> None:
        """Retry under a failed firing: that firing once more, at the next tick."""
        schedule_id, _, at = value.partition("|")
        schedule = await self.store.get_schedule(schedule_id) if self.store and at else None
        ref = ThreadRef.parse(schedule.key) if schedule else None
        # in the schedule's channel: its firings may be threads of their own there
        if schedule is None or ref is None or ref.channel != click.channel:
            await self._tell(click, GONE)
            return
        if refusal := self.policy.refusal(click.channel, click.user):
            await self._tell(click, refusal)
            return
        assert self.store is not None
        try:
            await self.store.update_schedule(schedule_id, run_now_at=float(at))
        except (NotFound, ValueError):
            await self._tell(click, GONE)
            return
        text = schedule_blocks.retrying(click.user)
        await self.web.update(click.channel, message_ts, text, [section(text)])

    async def _proposed(self, schedule_id: str, click: Click) -> ScheduleRecord | None:
        """The proposal the button names, when it still waits, in the thread clicked in."""
        if self.store is None:
            return None
        schedule = await self.store.get_schedule(schedule_id) if schedule_id else None
        if schedule is None or schedule.state != "proposed" or not click.in_thread(schedule.key):
            await self._tell(click, GONE)
            return None
        return schedule

    async def _tell(self, click: Click, text: str) -> None:
        await self.web.ephemeral(click.channel, click.user, text, click.thread_ts)
