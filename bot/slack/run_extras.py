"""What a run's view shows around the run itself: its files after an answer, budget notes
with their Continue buttons, and one-line notes (waits, restarts, idle sandboxes)."""

from __future__ import annotations

import secrets
from typing import Any

from bot.agent.events import RunFinished
from bot.sessions.events import BudgetSpent, Outputs
from bot.slack import notes, render
from bot.slack.agent_style import AgentStyle
from bot.slack.agent_threads import AgentThreads
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb

OUTPUT_MAX_BYTES = 50 << 20


class RunExtras:
    def __init__(
        self, web: SlackWeb, ref: ThreadRef, continue_usd: float, agent: AgentThreads | None
    ) -> None:
        self._web, self._ref, self._agent = web, ref, agent
        self._continue_usd = continue_usd
        self.run_id = ""
        self.finished: RunFinished | None = None

    async def say(self, text: str, blocks: list[dict] | None = None) -> None:
        await self._web.post(self._ref.channel, self._ref.ts, text, blocks)

    async def outputs(self, files: Outputs, streamed: AgentStyle | None) -> None:
        """After an answer: report.md and the charts as files, then any budget note.
        `streamed`: the run's agent style, whose one message says enough."""
        if self.finished is None:
            return  # a failed run's half-made files are not shared
        uploads = await _read(files)
        if streamed is None and not any(u["filename"] == "report.md" for u in uploads):
            await self.say(notes.NO_REPORT)
        if uploads:
            waiting = streamed.waiting if streamed else None
            await self._web.upload(self._ref.channel, self._ref.ts, uploads, waiting)
            if streamed is not None:
                await streamed.uploaded()
        if self.finished.stop == "budget":
            note = notes.budget_stop(self.finished.budget_usd)
            grant = f"run:{self.run_id}"
            await self.say(
                note, render.continue_button(note, self._ref.key, self._continue_usd, grant)
            )

    async def budget_spent(self, event: BudgetSpent) -> None:
        """Notes on files held for a run that will not come are posted as they are, then
        the budget's note (a thread's with a Continue button)."""
        for held in self._agent.claim(self._ref.key) if self._agent else []:
            await self.say(held.text)
        if event.scope == "user":
            await self.say(notes.user_budget(event.spent_usd, event.limit_usd))
            return
        note = notes.thread_budget(event.spent_usd, event.limit_usd)
        grant_id = f"spent:{secrets.token_hex(8)}"  # no run: this button's own
        await self.say(
            note, render.continue_button(note, self._ref.key, event.continue_usd, grant_id)
        )


async def _read(files: Outputs) -> list[dict[str, Any]]:
    """The run's files as uploads; one over OUTPUT_MAX_BYTES is left out."""
    uploads = []
    async for name, chunks in files():
        data = bytearray()
        async for chunk in chunks:
            data += chunk
            if len(data) > OUTPUT_MAX_BYTES:
                break
        if len(data) <= OUTPUT_MAX_BYTES:
            uploads.append(render.upload(name, bytes(data)))
    return uploads
