"""What a firing does in Slack: a note in the thread (late, and by how much, when the bot was
down), then the schedule's question asked as the owner, as a new run of the thread, through
the engine (so it waits for a person's run there). A schedule whose owner may no longer use
the bot in that channel pauses instead."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.run_events import RunFailed, RunFinished
from bot.schedules import compare
from bot.schedules.cadence import Cadence
from bot.schedules.scheduler import HANDED_OFF, Fired, Firing
from bot.sessions.engine import Engine
from bot.sessions.run import figure_records
from bot.slack.listen.policy import Policy
from bot.slack.listen.routing import Router
from bot.slack.render import schedule_blocks
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.store.base import ScheduleRecord, Store

log = logging.getLogger(__name__)


class SlackFirings:
    def __init__(
        self, engine: Engine, web: SlackWeb, store: Store, policy: Policy, router: Router
    ) -> None:
        self._engine, self._web, self._store, self._policy = engine, web, store, policy
        self._router = router
        # How a firing run here for another replica is recorded (the scheduler's `finish`).
        self.finish: Callable[[Firing, Fired], Awaitable[None]] | None = None

    async def fire(self, firing: Firing) -> Fired:
        """Run the firing here if this replica holds its thread; else hand it to the one
        that does (which runs and finishes it: `routed`)."""
        message = {
            "kind": "firing", "schedule_id": firing.schedule.id,
            "due": firing.due.timestamp(), "late": firing.late, "missed": firing.missed,
        }  # fmt: skip
        if not await self._router.here(firing.schedule.key, message):
            return Fired(HANDED_OFF)
        return await self.run(firing)

    async def routed(self, message: dict[str, Any]) -> None:
        """A firing another replica claimed, run and finished here, where its thread is held."""
        schedule = await self._store.get_schedule(str(message.get("schedule_id", "")))
        if schedule is None:
            return
        due = datetime.fromtimestamp(float(message["due"]), UTC)
        firing = Firing(schedule, due, bool(message.get("late")), int(message.get("missed", 0)))
        fired = await self.run(firing)
        if self.finish is not None:
            await self.finish(firing, fired)

    async def run(self, firing: Firing) -> Fired:
        schedule = firing.schedule
        ref = ThreadRef.parse(schedule.key)
        if ref is None:
            return Fired("skipped")
        if self._policy.refusal(ref.channel, schedule.owner):
            why = schedule_blocks.lost_access(schedule.owner)
            await self._store.update_schedule(schedule.id, state="paused", paused_why=why)
            await self._web.post(ref.channel, ref.ts, why)
            return Fired("skipped")
        now = time.time()
        words = Cadence(schedule.cron, schedule.zone).words(firing.due)
        late_by = now - firing.due.timestamp() if firing.late else 0.0
        note = schedule_blocks.firing(words, late_by, firing.missed)
        if schedule.post_as == "channel":  # a new message, the run in its thread
            ref = ThreadRef(ref.team, ref.channel, await self._web.post(ref.channel, None, note))
        else:
            await self._web.post(ref.channel, ref.ts, note)
            await self._fresh_repository(ref.key)
        asked = await self._engine.ask(ref.key, schedule.question, user=schedule.owner)
        result = await asked
        run_id = await self._run_of(ref.key, schedule.question)
        cost = (result.cost_usd or 0.0) if isinstance(result, RunFinished | RunFailed) else 0.0
        if isinstance(result, RunFinished):
            await self._compare(ref, firing, [str(f["text"]) for f in figure_records(result)])
            return Fired("finished", run_id, cost)
        if isinstance(result, RunFailed):
            # A retry is due just after the failed firing: however often it is pressed, once.
            text, blocks = schedule_blocks.failed(schedule.id, firing.due.timestamp() + 0.001)
            await self._web.post(ref.channel, ref.ts, text, blocks)
            return Fired("failed", run_id, cost)
        return Fired("stopped", run_id)

    async def _fresh_repository(self, key: str) -> None:
        """A thread analysing a repository gets a fresh sandbox, which fetches it again: the
        firing runs on its newest commit. (Its files come again too; the kernel starts
        afresh, and the model is told.) A person's run going there is waited for."""
        session = await self._engine.open(key, start=False)
        if session.repo_url:
            await session.suspend()

    async def _run_of(self, key: str, question: str) -> str:
        """The run that answered the firing: the thread's latest asking its question."""
        runs = await self._store.runs(key)
        answering = [r for r in runs if question in r.question]
        return answering[-1].run_id if answering else ""

    async def _compare(self, ref: ThreadRef, firing: Firing, figures: list[str]) -> None:
        """The figures against the last firing's that answered, in the thread."""
        schedule = firing.schedule
        earlier = [
            f for f in await self._store.firings(schedule.id, limit=10)
            if f.fire_at < firing.due.timestamp() and f.run_id and f.outcome == "finished"
        ]  # fmt: skip
        run = await self._store.get_run(earlier[0].run_id) if earlier else None
        if run is None:
            return
        before = [str(f.get("text", "")) for f in run.figures]
        when = datetime.fromtimestamp(earlier[0].fire_at, ZoneInfo(schedule.zone))
        if said := compare.note(before, figures, f"{when:%a} {when.day} {when:%b}"):
            await self._web.post(ref.channel, ref.ts, said)

    async def paused(self, schedule: ScheduleRecord, failures: int) -> None:
        ref = ThreadRef.parse(schedule.key)
        if ref is not None:
            editors = sorted(self._policy.schedule_editors)
            text = schedule_blocks.paused(failures, schedule.owner, editors)
            await self._web.post(ref.channel, ref.ts, text)
