"""The channel's notes as `/analyze memory` lists them, each with who saved it and when, and
a Forget button. Pure, like the rest of render/."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from bot.slack.render.block_kit import escape, fit, section
from bot.store.base import NoteRecord

FORGET_ACTION = "note_forget"
# A list's buttons are named "note_forget:<note id>": unique within the message.
FORGET_ACTIONS = re.compile(rf"^{FORGET_ACTION}:")
LIST_MAX = 20  # notes shown in one message (two blocks each, within 50)
NOTE_MAX = 600


def listing(notes: Sequence[NoteRecord]) -> tuple[str, list[dict[str, Any]]]:
    if not notes:
        text = 'No notes for this channel. Save one: "@bot remember for this channel: …".'
        return text, [section(text)]
    head = f"*Notes for this channel* ({len(notes)})"
    blocks: list[dict[str, Any]] = [section(head)]
    for note in notes[:LIST_MAX]:
        saved = time.strftime("%Y-%m-%d", time.gmtime(note.saved_at))
        line = f"> {escape(fit(note.text, NOTE_MAX))}\n_saved by <@{note.saved_by}> on {saved}_"
        button = {
            "type": "button",
            "action_id": f"{FORGET_ACTION}:{note.id}",
            "value": note.id,
            "text": {"type": "plain_text", "text": "Forget"},
        }
        blocks += [section(line), {"type": "actions", "elements": [button]}]
    if len(notes) > LIST_MAX:
        blocks.append(section(f"_… and {len(notes) - LIST_MAX} more._"))
    return head, blocks
