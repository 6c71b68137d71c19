"""The chart images the bot shared in a thread, by the file ids Slack gave it for them, kept
with the thread's session: a thread's notebook shows these, never a PNG someone else
shared there under a chart's name."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from bot.store.base import SessionStore

log = logging.getLogger(__name__)

CHART_SUFFIX = ".png"  # the images a notebook shows (notebook_store.is_png)
KEPT_MAX = 1000  # ids kept per thread: the latest, so a long thread's record stays small


class ChartFiles:
    def __init__(self, store: SessionStore | None) -> None:
        self._store = store

    async def add(
        self, key: str, uploads: Sequence[dict[str, Any]], file_ids: Sequence[str]
    ) -> None:
        """Keep the ids of the PNGs among `uploads` (Slack answers the ids in the order
        the files were given). A failure is logged: the charts stand, a notebook shows
        fewer."""
        found = {
            file_id: str(item["filename"])
            for item, file_id in zip(uploads, file_ids, strict=False)
            if file_id and str(item.get("filename", "")).lower().endswith(CHART_SUFFIX)
        }
        if self._store is None or not found:
            return
        try:
            kept = {**await self.ids(key), **found}
            latest = dict(list(kept.items())[-KEPT_MAX:])
            await self._store.update_session(key, chart_files=json.dumps(latest))
        except Exception as exc:
            log.warning("could not keep the chart ids of thread %s: %s", key, exc)

    async def ids(self, key: str) -> dict[str, str]:
        """{file id: name} of the charts the bot shared in the thread."""
        record = await self._store.get_session(key) if self._store else None
        try:
            saved = json.loads(record.chart_files) if record and record.chart_files else {}
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in saved.items()} if isinstance(saved, dict) else {}
