"""A thread's notebook from what the store keeps of it: the one gathering of runs, steps,
conversation and files that `notebook.py` turns into cells, for the CLI's export and the
Notebook button in Slack alike."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from bot.sessions.notebook import notebook
from bot.store.base import Store


async def thread_notebook(store: Store, key: str) -> dict[str, Any]:
    """The notebook (nbformat 4.5 JSON) of the session `key`."""
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
    )


async def notebook_text(book: dict[str, Any]) -> str:
    """The notebook as a .ipynb file's text (off the event loop: it can be large)."""
    return await asyncio.to_thread(json.dumps, book, indent=1, ensure_ascii=False) + "\n"
