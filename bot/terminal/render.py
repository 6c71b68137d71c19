"""The terminal view: tool calls as they happen, then the answer (its tables aligned), what
it cost, and the files saved (with where each chart's data is, and whether Slack can draw
it)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TextIO

from bot.clip import clip
from bot.results.chart_blocks import chart_block
from bot.results.charts import MAX_BYTES, parse_chart
from bot.results.tables import Table, find_tables, monospace, without_tables
from bot.run_events import (
    ContextTrimmed,
    Event,
    RunFailed,
    RunFinished,
    TextEmitted,
    ToolCallFinished,
    ToolCallStarted,
)
from bot.sessions.events import (
    BudgetSpent,
    Outputs,
    OutputsReady,
    RunInterrupted,
    RunStopped,
    SandboxWaiting,
    SessionEvent,
)
from bot.sessions.outputs import left_out_note
from bot.sessions.session import save_outputs
from bot.terminal.printable import printable
from bot.usage import Usage

CODE_LINES = 30
WAITING = "All {limit} sandboxes this bot may run at once are in use; waiting for one…"
MARKS = {"ok": "✓", "running": "…"}
TABLE_MAX = 100_000  # characters of one table's aligned text
CHART_DATA = ".chart.json"


class Painted(str):
    """Text already made printable and coloured by the view itself."""


class TerminalView:
    """`save_to`: where report.md and out/ go after each run (None: nowhere)."""

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        color: bool | None = None,
        save_to: Path | None = None,
    ) -> None:
        self._out = out or sys.stdout
        self._color = self._out.isatty() if color is None else color
        self._save_to = save_to
        self._calls = 0

    async def __call__(self, event: Event | SessionEvent) -> None:
        match event:
            case OutputsReady() if self._save_to is not None:
                await self._save(event.files, self._save_to)
            case RunStopped() | RunInterrupted():
                self._write(self._red("\nThe run was interrupted."))
            case BudgetSpent():
                self._write(self._red("\n" + budget_note(event)))
            case SandboxWaiting():
                self._write(self._dim(WAITING.format(limit=event.limit)))
            case ContextTrimmed():
                self._write(self._dim(trimmed_note(event)))
            case ToolCallStarted():
                self._calls += 1
                self._started(event)
            case ToolCallFinished():
                self._finished(event)
            case TextEmitted():
                self._write(self._dim(event.text.strip()))
            case RunFinished():
                self._write("\n" + aligned_tables(event.answer).strip() + "\n")
                self._write(self._dim(summary(event.turns, event.usage, event.cost_usd)))
                if event.figures_note:
                    self._write(self._dim(event.figures_note))
                if event.sandbox_wait_s >= 1:
                    self._write(self._dim(f"waited {event.sandbox_wait_s:.0f}s for the sandbox"))
            case RunFailed():
                self._write(self._red(f"\nFailed: {event.reason}"))
                self._write(self._dim(summary(event.turns, event.usage, event.cost_usd)))
        self._out.flush()

    async def _save(self, files: Outputs, dest: Path) -> None:
        left_out: list[tuple[str, str]] = []
        saved = await save_outputs(files, dest, left_out)
        for path in saved:
            self._write(f"Saved {path}")
        if left_out:
            self._write(left_out_note(left_out, "saved"))
        if not any(path.name == "report.md" for path in saved):
            self._write("No report.md was written in this run.")
        for path in saved:
            data = path.with_name(path.stem + CHART_DATA)
            if path.suffix.lower() == ".png" and data in saved:
                self._write(await chart_line(path, data))

    def _started(self, event: ToolCallStarted) -> None:
        what = event.language or event.tool
        if event.detached:
            what += " (detached)"
        self._write(self._bold(f"\n▶ [{self._calls}] {what}"))
        lines = event.code.rstrip().splitlines() or [""]
        shown = lines[:CODE_LINES]
        if len(lines) > CODE_LINES:
            shown.append(f"… {len(lines) - CODE_LINES} more lines")
        self._write("\n".join("    " + line for line in shown))

    def _finished(self, event: ToolCallFinished) -> None:
        mark = MARKS.get(event.status, "✗")
        head = f"  {mark} {event.status}"
        if event.exit_code is not None:
            head += f" · exit {event.exit_code}"
        head += f" · {event.duration_s:.2f}s"
        paint = self._green if event.status in MARKS else self._red
        self._write(paint(head))
        if event.excerpt.strip():
            excerpt = clip(event.excerpt, 1200)
            self._write(self._dim("\n".join("    " + ln for ln in excerpt.splitlines())))

    def _write(self, text: str | Painted) -> None:
        """Prints `text`: whatever it holds from the model, the sandbox or a file is
        stripped of control sequences first (only the view's own colours reach the tty)."""
        if not isinstance(text, Painted):
            text = printable(text)
        print(text, file=self._out)

    def _paint(self, code: str, text: str) -> Painted:
        text = printable(text)
        return Painted(f"\x1b[{code}m{text}\x1b[0m" if self._color else text)

    def _bold(self, text: str) -> Painted:
        return self._paint("1", text)

    def _dim(self, text: str) -> Painted:
        return self._paint("2", text)

    def _red(self, text: str) -> Painted:
        return self._paint("31", text)

    def _green(self, text: str) -> Painted:
        return self._paint("32", text)


def aligned_tables(markdown: str) -> str:
    """The answer with each Markdown table as aligned columns under its caption."""

    def aligned(_: int, table: Table) -> str:
        text, shown = monospace(table, TABLE_MAX)
        more = f"\n… {table.total_rows - shown:,} more rows" if shown < table.total_rows else ""
        return f"{table.caption}\n{text}{more}"

    return without_tables(markdown, find_tables(markdown), aligned)


async def chart_line(image: Path, data: Path) -> str:
    """`chart: out/figure-1.png (data: out/figure-1.chart.json, bar, Slack-drawable)`."""
    raw = await asyncio.to_thread(_head, data, MAX_BYTES + 1)
    chart = parse_chart(raw)
    if chart is None:
        return f"chart: {image} (data: {data}, unreadable)"
    block, reason = chart_block(chart)
    fit = reason if block else f"not drawable in Slack: {reason}"
    return f"chart: {image} (data: {data}, {chart.kind}, {fit})"


def _head(path: Path, size: int) -> bytes:
    with path.open("rb") as handle:
        return handle.read(size)


def summary(turns: int, usage: Usage, cost: float | None) -> str:
    """`3 turns · 12,345 tokens in (10,000 cached, 1,200 written) · 980 out · $0.0123`."""
    price = f"${cost:.4f}" if cost is not None else "cost unknown (model not in price table)"
    return (
        f"{turns} turn{'s' if turns != 1 else ''} · {usage.prompt_tokens:,} tokens in "
        f"({usage.cache_read_tokens:,} cached, {usage.cache_write_tokens:,} written) · "
        f"{usage.output_tokens:,} out · {price}"
    )


def trimmed_note(event: ContextTrimmed) -> str:
    """One line on the conversation made shorter to fit the model's context."""
    who = "the model API" if event.by == "server" else "the bot"
    if event.kind == "cleared":
        what = f"{event.items} old tool output{'s' if event.items != 1 else ''} cleared"
    else:
        what = "earlier steps summarised"
    size = f"~{event.before_tokens:,} → ~{event.after_tokens:,} tokens"
    return f"· {what} by {who} to fit the model's context ({size})"


def budget_note(event: BudgetSpent) -> str:
    whose = "this session's" if event.scope == "thread" else "your daily"
    return (
        f"No budget left: ${event.spent_usd:.2f} of {whose} ${event.limit_usd:.2f} is spent "
        "(MAX_COST_USD_PER_THREAD, MAX_COST_USD_PER_USER_DAY)."
    )
