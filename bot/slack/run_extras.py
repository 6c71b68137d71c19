"""What a run's view shows around the run itself: after an answer, its data (tables,
charts, the report's canvas; results.py) and its files; budget notes with their Continue
buttons; and one-line notes (waits, restarts, idle sandboxes)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

from bot.agent.events import RunFinished
from bot.results.charts import Chart, describe, parse_chart
from bot.results.tables import Table, table_from_csv
from bot.sessions.events import BudgetSpent, Outputs
from bot.slack import notes, render
from bot.slack.agent_style import AgentStyle
from bot.slack.agent_threads import AgentThreads
from bot.slack.canvas import ReportCanvases, TokenFor
from bot.slack.results import TABLES_MAX, AnswerData, ResultsPoster
from bot.slack.surfaces import Surfaces
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.store.base import Store

OUTPUT_MAX_BYTES = 50 << 20
CHART_SUFFIX = ".chart.json"  # the kernel's record of the chart in the image of that stem
CHART_MAX_BYTES = 512 << 10
REPORT = "report.md"


@dataclass
class DataSurfaces:
    """How a workspace's answers show their data: tables and charts as blocks (with what
    each workspace refused), the report as a canvas (None: files only)."""

    results: ResultsPoster
    canvases: ReportCanvases | None

    @classmethod
    def of(
        cls, web: SlackWeb, store: Store | None, token_for: TokenFor = lambda key: None
    ) -> DataSurfaces:
        """Both, learning per workspace; canvas ids kept in `store`, written with the
        thread's fencing token (`token_for`)."""
        return cls(ResultsPoster(web, Surfaces()), ReportCanvases(web, store, token_for))


class RunExtras:
    def __init__(
        self,
        web: SlackWeb,
        ref: ThreadRef,
        continue_usd: float,
        agent: AgentThreads | None,
        data: DataSurfaces | None = None,
    ) -> None:
        self._web, self._ref, self._agent, self._data = web, ref, agent, data
        self._continue_usd = continue_usd
        self.run_id = ""
        self.finished: RunFinished | None = None
        self.answer_tables: list[Table] = []  # the answer's tables, shown after it

    async def say(self, text: str, blocks: list[dict] | None = None) -> None:
        await self._web.post(self._ref.channel, self._ref.ts, text, blocks)

    async def outputs(self, files: Outputs, streamed: AgentStyle | None) -> None:
        """After an answer: report.md and the charts as files, then any budget note.
        `streamed`: the run's agent style, whose one message says enough."""
        if self.finished is None:
            return  # a failed run's half-made files are not shared
        tables, self.answer_tables = self.answer_tables, []
        try:
            found = await _read(files)
        except Exception:  # the answer points at its tables: they come even so
            await self._show_data(Found([], {}), tables)
            raise
        uploads = await self._show_data(found, tables)
        if streamed is None and not any(u["filename"] == REPORT for u in uploads):
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
        await self._unhold()
        if event.scope == "user":
            await self.say(notes.user_budget(event.spent_usd, event.limit_usd))
            return
        note = notes.thread_budget(event.spent_usd, event.limit_usd)
        grant_id = f"spent:{secrets.token_hex(8)}"  # no run: this button's own
        await self.say(
            note, render.continue_button(note, self._ref.key, event.continue_usd, grant_id)
        )

    async def stopped_before_start(self, by: str | None) -> None:
        """A question stopped before its run started: its files' notes, and why no answer."""
        await self._unhold()
        await self.say(notes.stopped(by))

    async def _unhold(self) -> None:
        """Post the notes on files held for a run that will not come, as they are."""
        for held in self._agent.claim(self._ref.key) if self._agent else []:
            await self.say(held.text)

    async def _show_data(self, found: Found, tables: list[Table]) -> list[dict[str, Any]]:
        """Post the answer's data (its tables, result CSVs, charts, the report's canvas);
        returns the uploads, with the CSVs of tables cut to fit and the charts' alt text."""
        if self._data is None:
            return [render.upload(name, content) for name, content in found.files]
        data = AnswerData(tables=[(t, None) for t in tables], charts=list(found.charts.values()))
        data.tables += await asyncio.to_thread(_csv_tables, found.files)
        report = dict(found.files).get(REPORT)
        if report is not None and self._data.canvases is not None:
            text = report.decode("utf-8", "replace")
            data.canvas_id = await self._data.canvases.publish(self._ref, text)
        uploads = [render.upload(n, c, _alt(found.charts.get(_stem(n)))) for n, c in found.files]
        if data:
            taken = {u["filename"] for u in uploads}
            uploads += await self._data.results.post(self._ref, data, taken)
        return uploads


@dataclass
class Found:
    """A run's files (name, bytes) to attach, and the charts recorded for their images
    (by the image's stem)."""

    files: list[tuple[str, bytes]]
    charts: dict[str, Chart]


async def _read(files: Outputs) -> Found:
    """The run's files; one over OUTPUT_MAX_BYTES is left out, and the kernel's chart
    records are read (they are hostile: written in the sandbox) rather than attached."""
    found = Found([], {})
    async for name, chunks in files():
        is_chart = name.endswith(CHART_SUFFIX)
        limit = CHART_MAX_BYTES if is_chart else OUTPUT_MAX_BYTES
        data = bytearray()
        async for chunk in chunks:
            data += chunk
            if len(data) > limit:
                break
        if len(data) > limit:
            continue
        if is_chart:
            chart = await asyncio.to_thread(parse_chart, bytes(data))
            if chart is not None:
                found.charts[name.removesuffix(CHART_SUFFIX)] = chart
        else:
            found.files.append((name, bytes(data)))
    images = {_stem(n) for n, _ in found.files if n.lower().endswith(render.IMAGE_SUFFIXES)}
    found.charts = {stem: c for stem, c in found.charts.items() if stem in images}
    return found


def _csv_tables(files: list[tuple[str, bytes]]) -> list[tuple[Table, str | None]]:
    """The result tables the run wrote as CSV files (each attached whole already); only
    as many as are shown, so a run that wrote thousands is not read through."""
    tables: list[tuple[Table, str | None]] = []
    for name, content in files:
        if len(tables) == TABLES_MAX:
            break
        if name.lower().endswith(".csv"):
            table = table_from_csv(content, _stem(name).replace("_", " "))
            if table is not None:
                tables.append((table, name))
    return tables


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]


def _alt(chart: Chart | None) -> str | None:
    return describe(chart, render.ALT_MAX) if chart else None
