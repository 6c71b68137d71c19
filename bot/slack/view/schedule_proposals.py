"""A schedule the model proposed (its `schedule_run` call), shown to the person who asked: in
words, in their Slack time zone, with Confirm and Cancel. It is kept in the store as
"proposed", never fired, until they confirm (listen/schedule_buttons.py)."""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.schedules.cadence import CadenceError, cadence
from bot.slack.render import schedule_blocks
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.store.base import ScheduleRecord, Store

log = logging.getLogger(__name__)

NO_ZONE = "Your Slack time zone could not be read, so the times are UTC."


@dataclass(frozen=True)
class ScheduleLimits:
    min_interval_s: float
    per_channel: int
    per_workspace: int


class ScheduleProposals:
    def __init__(self, web: SlackWeb, store: Store, limits: ScheduleLimits) -> None:
        self._web, self._store, self._limits = web, store, limits

    async def propose(self, ref: ThreadRef, asker: str, run_id: str, call_input: str) -> None:
        """Show the proposal in the thread (or why it cannot be one)."""
        try:
            given = json.loads(call_input)
            cron, question = str(given["cron"]), str(given.get("question") or "")
            post_as = "channel" if given.get("new_message") is True else "thread"
        except (ValueError, KeyError, TypeError):
            return  # the tool refused it already
        question = question.strip() or await self._earlier_question(ref, run_id)
        zone = await self._web.user_zone(asker)
        now = datetime.fromtimestamp(time.time(), UTC)
        try:
            made = cadence(cron, zone or "UTC", now=now, min_interval_s=self._limits.min_interval_s)
        except CadenceError as exc:
            await self._web.post(ref.channel, ref.ts, schedule_blocks.refused(str(exc)))
            return
        if why := await self._over_limit(ref):
            await self._web.post(ref.channel, ref.ts, schedule_blocks.refused(why))
            return
        record = ScheduleRecord(
            id=secrets.token_hex(6), key=ref.key, owner=asker, cron=made.expression,
            zone=made.zone, question=question, created_at=now.timestamp(), state="proposed",
            post_as=post_as,
        )  # fmt: skip
        await self._store.save_schedule(record)
        words = made.words(now)
        blocks = schedule_blocks.proposal(
            record.id, words, question, asker, "" if zone else NO_ZONE
        )
        await self._web.post(ref.channel, ref.ts, schedule_blocks.proposal_text(words), blocks)

    async def _earlier_question(self, ref: ThreadRef, run_id: str) -> str:
        """The thread's question before this run's (this run's own when it is the first)."""
        runs = await self._store.runs(ref.key)
        earlier = [r.question for r in runs if r.run_id != run_id]
        if earlier:
            return earlier[-1]
        this = [r.question for r in runs if r.run_id == run_id]
        return this[0] if this else ""

    async def _over_limit(self, ref: ThreadRef) -> str | None:
        places = [ThreadRef.parse(s.key) for s in await self._store.list_schedules()]
        team = [p for p in places if p is not None and p.team == ref.team]
        if len(team) >= self._limits.per_workspace:
            return f"this workspace has {len(team)} schedules, the most it may have."
        channel = [p for p in team if p.channel == ref.channel]
        if len(channel) >= self._limits.per_channel:
            return f"this channel has {len(channel)} schedules, the most it may have."
        return None
