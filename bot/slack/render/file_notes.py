"""What the thread says about a file it was given: its data card (or its size) when taken
in, why when refused, and the same as a task for the assistant style's plan."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from bot.datacard import for_slack
from bot.datacard.data_file import DataFile
from bot.slack.render import block_kit, stream_chunks
from bot.units import size_text


@dataclass(frozen=True)
class FileNote:
    """A file taken in (or refused): the thread's note on it, and the same as a task."""

    text: str  # a message of its own
    task: dict[str, Any]  # a task_update chunk for the run's plan


def safe_display(name: str) -> str:
    """A file name as it may appear in a message: no mrkdwn, control or direction marks."""
    shown = "".join(c for c in name if c.isprintable())  # drops controls and bidi marks
    return block_kit.escape(shown.replace("`", "'"))[:120] or "file"


def intake_note(name: str, taken: DataFile) -> str:
    """The thread's note for a file taken in: its data card, or its size when it has none."""
    if not taken.cards:
        return f":inbox_tray: Got {name} ({size_text(taken.size)}) → `{taken.path}`"
    cards = "\n".join(for_slack(card) for card in taken.cards)
    first, _, rest = cards.partition("\n")
    return f":inbox_tray: {first} → `{taken.path}`" + (f"\n{rest}" if rest else "")


def file_note(text: str, title: str, output: str, *, ok: bool) -> FileNote:
    task_id = f"file-{uuid.uuid4().hex[:8]}"
    return FileNote(text, stream_chunks.file_task(title, output, ok=ok, task_id=task_id))
