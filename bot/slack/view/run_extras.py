"""What a run's view shows around the run itself: after an answer, its data (tables,
charts, the report's canvas; results.py) and its files; budget notes with their Continue
buttons; and one-line notes (waits, restarts, idle sandboxes)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

from bot.results.charts import Chart, describe
from bot.results.tables import Table
from bot.run_events import RunFinished
from bot.sessions.events import BudgetSpent, Outputs
from bot.sessions.outputs import left_out_note
from bot.slack.render import block_kit, wording
from bot.slack.threads import ThreadRef
from bot.slack.view.answer_files import REPORT, Found, collect, csv_tables
from bot.slack.view.assistant_style import AssistantStyle
from bot.slack.view.assistant_threads import AssistantThreads
from bot.slack.view.canvas import ReportCanvases, TokenFor
from bot.slack.view.chart_files import ChartFiles
from bot.slack.view.results import AnswerData, ResultsPoster
from bot.slack.view.surfaces import Surfaces
from bot.slack.web import SlackWeb
from bot.store.base import SessionStore


@dataclass
class DataSurfaces:
    """How a workspace's answers show their data: tables and charts as blocks (with what
    each workspace refused), the report as a canvas (None: files only)."""

    results: ResultsPoster
    canvases: ReportCanvases | None
    charts: ChartFiles | None = None  # the ids of the charts shared, for the notebook

    @classmethod
    def of(
        cls, web: SlackWeb, store: SessionStore | None, token_for: TokenFor = lambda key: None
    ) -> DataSurfaces:
        """Both, learning per workspace; canvas and chart ids kept in `store`, the canvas's
        written with the thread's fencing token (`token_for`)."""
        canvases = ReportCanvases(web, store, token_for)
        return cls(ResultsPoster(web, Surfaces()), canvases, ChartFiles(store))


class RunExtras:
    def __init__(
        self,
        web: SlackWeb,
        ref: ThreadRef,
        continue_usd: float,
        assistant: AssistantThreads | None,
        data: DataSurfaces | None = None,
    ) -> None:
        self._web, self._ref, self._assistant, self._data = web, ref, assistant, data
        self._continue_usd = continue_usd
        self.run_id = ""
        self.finished: RunFinished | None = None
        self.answer_tables: list[Table] = []  # the answer's tables, shown after it

    async def say(self, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        await self._web.post(self._ref.channel, self._ref.ts, text, blocks)

    async def outputs(self, files: Outputs, streamed: AssistantStyle | None) -> None:
        """After an answer: report.md and the charts as files, what was left out of them,
        then any budget note. `streamed`: the run's assistant style, whose one message says
        enough."""
        if self.finished is None:
            return  # a failed run's half-made files are not shared
        tables, self.answer_tables = self.answer_tables, []
        try:
            found = await collect(files)
        except Exception:  # the answer points at its tables: they come even so
            await self._show_data(None, tables)
            raise
        try:
            await self._attach(found, tables, streamed)
        finally:
            await found.remove()
        if note := left_out_note(found.left_out):
            await self.say(note)
        if self.finished.stop == "budget":
            note = wording.budget_stop(self.finished.budget_usd)
            grant = f"run:{self.run_id}"
            await self.say(
                note, block_kit.continue_button(note, self._ref.key, self._continue_usd, grant)
            )

    async def _attach(
        self, found: Found, tables: list[Table], streamed: AssistantStyle | None
    ) -> None:
        uploads = await self._show_data(found, tables)
        if streamed is None and not any(u["filename"] == REPORT for u in uploads):
            await self.say(wording.NO_REPORT)
        if uploads:
            waiting = streamed.waiting if streamed else None
            file_ids = await self._web.upload(self._ref.channel, self._ref.ts, uploads, waiting)
            if self._data is not None and self._data.charts is not None:
                await self._data.charts.add(self._ref.key, uploads, file_ids)
            if streamed is not None:
                await streamed.uploaded()

    async def budget_spent(self, event: BudgetSpent) -> None:
        """Notes on files held for a run that will not come are posted as they are, then
        the budget's note (a thread's with a Continue button)."""
        await self._unhold()
        if event.scope == "user":
            await self.say(wording.user_budget(event.spent_usd, event.limit_usd))
            return
        note = wording.thread_budget(event.spent_usd, event.limit_usd)
        grant_id = f"spent:{secrets.token_hex(8)}"  # no run: this button's own
        await self.say(
            note, block_kit.continue_button(note, self._ref.key, event.continue_usd, grant_id)
        )

    async def stopped_before_start(self, by: str | None) -> None:
        """A question stopped before its run started: its files' notes, and why no answer."""
        await self._unhold()
        await self.say(wording.stopped(by))

    async def _unhold(self) -> None:
        """Post the notes on files held for a run that will not come, as they are."""
        for held in self._assistant.claim(self._ref.key) if self._assistant else []:
            await self.say(held.text)

    async def _show_data(self, found: Found | None, tables: list[Table]) -> list[dict[str, Any]]:
        """Post the answer's data (its tables, result CSVs, charts, the report's canvas);
        returns the uploads, with the CSVs of tables cut to fit and the charts' alt text."""
        kept = found.files if found else []
        charts = found.charts if found else {}
        uploads = [block_kit.upload(k.name, k.path, _alt(charts.get(_stem(k.name)))) for k in kept]
        if self._data is None:
            return uploads
        data = AnswerData(tables=[(t, None) for t in tables], charts=list(charts.values()))
        data.tables += await asyncio.to_thread(csv_tables, kept)
        report = await asyncio.to_thread(found.report_text) if found else None
        if report is not None and self._data.canvases is not None:
            data.canvas_id = await self._data.canvases.publish(self._ref, report)
        if data:
            taken = {u["filename"] for u in uploads}
            uploads += await self._data.results.post(self._ref, data, taken)
        return uploads


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]


def _alt(chart: Chart | None) -> str | None:
    return describe(chart, block_kit.ALT_MAX) if chart else None
