"""An answer's data the way Slack shows data: its tables as `data_table` blocks (sortable,
paginated, numbers as numbers), its charts as `data_visualization` blocks, and the link to
its report's canvas, in messages under the answer (the same in both UI styles).

Slack takes one table and two charts per message, so each table gets a message, and the
charts and the canvas link ride along with the first ones. A workspace that refuses a
block gets its fallback (surfaces.py) in the same post's retry. A table cut to fit has its
whole self attached as CSV; each chart's image is attached anyway (for download, and for
clients without the block), described by its alt text. When Slack refuses even the last
fallback, the message goes again as plain text, so the data and the report are never lost.

The message's `text` (notifications, old clients) is mrkdwn: the tables and charts in it
come from files and the model, so they are escaped there, never read as mentions or links."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from bot.results.chart_blocks import chart_block
from bot.results.charts import Chart, describe
from bot.results.tables import Table, find_tables, monospace, to_csv, without_tables
from bot.slack.render import block_kit, canvas_text, data_blocks, wording
from bot.slack.threads import ThreadRef
from bot.slack.view.surfaces import Shape, Surfaces
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackMalformed

log = logging.getLogger(__name__)

TABLES_MAX = 3  # tables shown as blocks per answer; the others stay text, aligned
CHARTS_MAX = 4  # charts shown as blocks per answer; the others are their images alone
TEXT_MAX = 1500  # the fallback text's share of a message: notifications and old clients
PART_ENTITY = re.compile(r"&[a-z]*$")  # an escape cut short


@dataclass
class AnswerData:
    """What an answer showed: its tables (the answer's own, then result CSVs) with the
    CSV file that holds each whole (None: to be attached when cut), its charts, and its
    report's canvas."""

    tables: list[tuple[Table, str | None]] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    canvas_id: str | None = None

    def __bool__(self) -> bool:
        return bool(self.tables or self.charts or self.canvas_id)


def split_answer(answer: str) -> tuple[str, list[Table]]:
    """The answer with its first tables replaced by a line pointing below (where they are
    shown as tables) and any others aligned in code blocks, and those first tables."""
    spans = find_tables(answer)
    shown = [table for _, _, table in spans[:TABLES_MAX]]

    def instead(i: int, table: Table) -> str:
        if i < TABLES_MAX:
            return wording.table_pointer(i + 1, table.caption)
        return "```\n" + monospace(table, 2800)[0] + "\n```"

    return (without_tables(answer, spans, instead) if spans else answer), shown


class ResultsPoster:
    def __init__(self, web: SlackWeb, surfaces: Surfaces) -> None:
        self._web, self._surfaces = web, surfaces

    async def post(self, ref: ThreadRef, data: AnswerData, taken: set[str]) -> list[dict[str, Any]]:
        """Post `data` under the answer; returns the CSV uploads of tables cut to fit
        (named apart from `taken`, the other files' names)."""
        charts = [(c, b) for c in data.charts[:CHARTS_MAX] if (b := _block(c)) is not None]
        tables = data.tables[:TABLES_MAX]
        csvs = {i: name or _csv_name(t.caption, taken) for i, (t, name) in enumerate(tables)}
        per = data_blocks.charts_per_message
        count = max(len(tables), -(-len(charts) // per), 1)
        uploads = []
        for i in range(count):
            table = tables[i] if i < len(tables) else None
            pair = charts[per * i : per * (i + 1)]
            canvas = data.canvas_id if i == 0 else None
            if table is None and not pair and canvas is None:
                continue
            capped = await self._post_one(ref, table and (table[0], csvs[i]), pair, canvas)
            if capped and table is not None and table[1] is None:
                uploads.append(_csv_upload(table[0], csvs[i]))
        return uploads

    async def _post_one(
        self,
        ref: ThreadRef,
        table: tuple[Table, str] | None,
        charts: list[tuple[Chart, dict[str, Any]]],
        canvas_id: str | None,
    ) -> bool:
        """One message; whether its table was cut. Falls back as the workspace requires."""
        shape = self._surfaces.shape(ref.team)
        while True:
            text, blocks, capped = _message(table, charts, canvas_id, shape)
            if not blocks:  # charts alone, in a workspace without them: their images say it
                return capped
            try:
                await self._web.post(ref.channel, ref.ts, text, blocks)
                return capped
            except SlackMalformed as exc:
                refused = exc.code == "invalid_blocks"
                if not refused or not self._surfaces.refused(ref.team, shape, blocks, exc.messages):
                    log.warning("Slack refused the data of thread %s's answer (%s %s); "
                                "it goes as plain text", ref.key, exc.code,
                                "; ".join(exc.messages))  # fmt: skip
                    return await self._post_plain(ref, text, table is not None)

    async def _post_plain(self, ref: ThreadRef, text: str, has_table: bool) -> bool:
        """The last fallback: the message's text alone. Whether a table went (it is cut, so
        its whole CSV is attached)."""
        try:
            await self._web.post(ref.channel, ref.ts, text)
        except SlackMalformed as exc:
            log.error("Slack refused the data of thread %s's answer as text too: %s %s",
                      ref.key, exc.code, "; ".join(exc.messages))  # fmt: skip
            return False
        return has_table


def _message(
    table: tuple[Table, str] | None,
    charts: list[tuple[Chart, dict[str, Any]]],
    canvas_id: str | None,
    shape: Shape,
) -> tuple[str, list[dict[str, Any]], bool]:
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    capped = False
    if table is not None:
        table_blocks, capped = data_blocks.table_blocks(
            table[0], shape.table_kind, csv_name=table[1]
        )
        blocks += table_blocks
        shown = monospace(table[0], TEXT_MAX)[0]
        texts.append(_plain(f"{table[0].caption}\n{shown}", TEXT_MAX))
    for chart, block in charts:
        if shape.charts:
            blocks.append(block)
        texts.append(_plain(describe(chart, TEXT_MAX // 2), TEXT_MAX // 2))
    if canvas_id is not None:
        blocks.append(canvas_text.link(canvas_id))
        texts.append(wording.REPORT_CANVAS)
    return "\n\n".join(texts), blocks, capped


def _plain(text: str, limit: int) -> str:
    """`text` escaped for mrkdwn, shown as typed, cut to `limit` characters all told (an
    escape is never cut in half)."""
    escaped = block_kit.escape(text)
    if len(escaped) <= limit:
        return escaped
    return PART_ENTITY.sub("", escaped[: limit - 1]) + "…"


def _block(chart: Chart) -> dict[str, Any] | None:
    block, why = chart_block(chart)
    if block is None:
        log.info("chart %s stays an image: %s", chart.image, why)
    return block


def _csv_name(caption: str, taken: set[str]) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", caption.lower()).strip("-")[:60] or "table"
    name, n = f"{stem}.csv", 1
    while name in taken:
        n += 1
        name = f"{stem}-{n}.csv"
    taken.add(name)
    return name


def _csv_upload(table: Table, name: str) -> dict[str, Any]:
    return block_kit.upload(name, to_csv(table))
