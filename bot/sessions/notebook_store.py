"""A thread's notebook from what the store keeps of it: the one gathering of runs, steps,
conversation and files that `notebook.py` turns into cells, for the CLI's export and the
Notebook button in Slack alike."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bot.sessions.notebook import notebook
from bot.store.base import Store, ToolCallRecord

CHARTS_MAX = 20  # the PNGs a notebook takes
NAMES_MAX = 2000  # the PNG names looked for, found or not: a bound on the work
CHART_MAX_BYTES = 5 << 20  # each
PNG = b"\x89PNG\r\n\x1a\n"
PNG_NAME = re.compile(r"[\w.-]+\.png", re.IGNORECASE)


# The charts a notebook shows (image name -> PNG bytes), given the thread's steps.
ChartSource = Callable[[Sequence[ToolCallRecord]], Awaitable[Mapping[str, bytes]]]


async def thread_notebook(
    store: Store, key: str, charts: ChartSource | None = None
) -> dict[str, Any]:
    """The notebook (nbformat 4.5 JSON) of the session `key`; the `charts` found for its
    steps become the image outputs of the steps that saved them."""
    calls = await store.tool_calls(key)
    # The runs that made steps; a question answered without any is found in the history.
    run_ids = list(dict.fromkeys(c.run_id for c in calls))
    runs = [run for run_id in run_ids if (run := await store.get_run(run_id))]
    return notebook(
        runs,
        calls,
        await store.load_history(key),
        await store.files(key),
        archived=await store.archived_history(key),
        images=chart_steps(calls, await charts(calls) if charts else {}),
    )


def chart_steps(calls: Sequence[ToolCallRecord], charts: Mapping[str, bytes]) -> dict[str, Any]:
    """Each chart under the step that saved it: the latest step whose code or output names
    its file (the kernel prints "[figure saved to …/figure-1.png]"; savefig names it)."""
    images: dict[str, list[bytes]] = {}
    for name, png in charts.items():
        savers = [c for c in calls if name in c.code or name in c.excerpt]
        if savers:
            images.setdefault(savers[-1].call_id, []).append(png)
    return images


def is_png(data: bytes) -> bool:
    return len(data) <= CHART_MAX_BYTES and data.startswith(PNG)


async def saved_charts(folder: Path, calls: Sequence[ToolCallRecord]) -> dict[str, bytes]:
    """The charts the steps name that a terminal session saved in `folder` (`ask --out`):
    PNG files only, by name, no link followed (the files came out of the sandbox). The
    first CHARTS_MAX found are taken: names of files that are not there take no place."""
    named = dict.fromkeys(n for c in calls for n in PNG_NAME.findall(c.code + c.excerpt))
    return await asyncio.to_thread(_read_pngs, folder, list(named)[:NAMES_MAX])


def _read_pngs(folder: Path, names: Sequence[str]) -> dict[str, bytes]:
    charts: dict[str, bytes] = {}
    for name in names:
        data = _read_png(folder / name)
        if data is not None:
            charts[name] = data
            if len(charts) == CHARTS_MAX:
                break
    return charts


def _read_png(path: Path) -> bytes | None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None  # a FIFO or a device would block, or never end
            data = file.read(CHART_MAX_BYTES + 1)
            return data if is_png(data) else None
    return None


async def notebook_text(book: dict[str, Any]) -> str:
    """The notebook as a .ipynb file's text (off the event loop: it can be large)."""
    return await asyncio.to_thread(json.dumps, book, indent=1, ensure_ascii=False) + "\n"
