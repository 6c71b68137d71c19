"""An answer's files on their way to Slack: each streamed from the sandbox into a host
temporary folder (never whole in memory), within the output caps (bot.sessions.outputs),
then uploaded from there. Only small ones are read back: the kernel's chart records, the
report for its canvas, result CSVs for their tables."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import SandboxPathError
from bot.results.charts import Chart, parse_chart
from bot.results.tables import Table, table_from_csv
from bot.sessions.events import Outputs
from bot.sessions.outputs import LeftOut, write_stream
from bot.slack.render import block_kit
from bot.slack.render.canvas_text import CANVAS_MAX
from bot.slack.view.results import TABLES_MAX

CHART_SUFFIX = ".chart.json"  # the kernel's record of the chart in the image of that stem
CHART_MAX_BYTES = 512 << 10
READ_MAX_BYTES = 4 * CANVAS_MAX  # a report or CSV read back; more could not be shown
REPORT = "report.md"


@dataclass(frozen=True)
class Kept:
    """A file to attach, held on the host."""

    name: str
    path: Path
    size: int


@dataclass
class Found:
    """A run's files to attach, the charts recorded for their images (by the image's
    stem), and the files left out, with why."""

    folder: Path
    files: list[Kept] = field(default_factory=list)
    charts: dict[str, Chart] = field(default_factory=dict)
    left_out: list[tuple[str, str]] = field(default_factory=list)

    async def remove(self) -> None:
        await asyncio.to_thread(shutil.rmtree, self.folder, ignore_errors=True)

    def report_text(self) -> str | None:
        """The report, if written and small enough to show as a canvas."""
        report = next((k for k in self.files if k.name == REPORT), None)
        if report is None or report.size > READ_MAX_BYTES:
            return None
        return report.path.read_bytes().decode("utf-8", "replace")


async def collect(files: Outputs) -> Found:
    """The run's files, each in a host file. The kernel's chart records are read (they are
    hostile: written in the sandbox) rather than attached. The caller removes the folder."""
    found = Found(Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="answer-")))
    try:
        count = 0
        async for file in files():
            if file.chunks is None:
                found.left_out.append((file.name, file.why))
                continue
            count += 1
            path = found.folder / f"{count}-{file.name}"  # names are safe, and apart
            try:
                size = await write_stream(file.chunks, path, _limit(file.name))
            except LeftOut as exc:
                found.left_out.append((file.name, str(exc)))
                continue
            except SandboxPathError:
                continue  # gone since the listing
            if size is not None:
                await _keep(found, Kept(file.name, path, size))
        images = {_stem(k.name) for k in found.files if _is_image(k.name)}
        found.charts = {stem: c for stem, c in found.charts.items() if stem in images}
    except BaseException:
        await found.remove()
        raise
    return found


def csv_tables(files: list[Kept]) -> list[tuple[Table, str | None]]:
    """The result tables the run wrote as CSV files (each attached whole); only as many as
    are shown, so a run that wrote thousands is not read through."""
    tables: list[tuple[Table, str | None]] = []
    for kept in files:
        if len(tables) == TABLES_MAX:
            break
        if kept.name.lower().endswith(".csv") and kept.size <= READ_MAX_BYTES:
            table = table_from_csv(kept.path.read_bytes(), _stem(kept.name).replace("_", " "))
            if table is not None:
                tables.append((table, kept.name))
    return tables


async def _keep(found: Found, kept: Kept) -> None:
    if not kept.name.endswith(CHART_SUFFIX):
        found.files.append(kept)
        return
    chart = await asyncio.to_thread(lambda: parse_chart(kept.path.read_bytes()))
    await asyncio.to_thread(kept.path.unlink)
    if chart is not None:
        found.charts[kept.name.removesuffix(CHART_SUFFIX)] = chart


def _limit(name: str) -> int | None:
    return CHART_MAX_BYTES if name.endswith(CHART_SUFFIX) else None


def _is_image(name: str) -> bool:
    return name.lower().endswith(block_kit.IMAGE_SUFFIXES)


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]
