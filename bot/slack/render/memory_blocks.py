"""The channel's notes as `/analyze memory` lists them, each with who saved it and when, and
a Forget button. Pure, like the rest of render/."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from bot.slack.render.block_kit import escape, fit, section
from bot.store.base import DefinitionRecord, NoteRecord

FORGET_ACTION = "note_forget"
FORGET_DEFINITION_ACTION = "definition_forget"
# A list's buttons are named "<action>:<n>": unique within the message.
FORGET_ACTIONS = re.compile(rf"^({FORGET_ACTION}|{FORGET_DEFINITION_ACTION}):")
LIST_MAX = 15  # notes shown in one message (two blocks each, within 50)
DEFINITIONS_MAX = 8  # and definitions
NOTE_MAX = 600


def listing(
    notes: Sequence[NoteRecord], definitions: Sequence[DefinitionRecord] = ()
) -> tuple[str, list[dict[str, Any]]]:
    if not notes and not definitions:
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
    if definitions:
        blocks.append(section(f"*Saved definitions* ({len(definitions)})"))
    for i, d in enumerate(definitions[:DEFINITIONS_MAX]):
        saved = time.strftime("%Y-%m-%d", time.gmtime(d.saved_at))
        computed = f", computed {escape(', '.join(d.figures[:3]))}" if d.figures else ""
        line = (
            f"*{escape(fit(d.name, 80))}*: a `{escape(d.language)}` step{computed}\n"
            f"_saved by <@{d.saved_by}> on {saved}_"
        )
        button = {
            "type": "button",
            "action_id": f"{FORGET_DEFINITION_ACTION}:{i}",
            "value": d.name,
            "text": {"type": "plain_text", "text": "Forget"},
        }
        blocks += [section(line), {"type": "actions", "elements": [button]}]
    return head, blocks


SAVE_ACTION = "note_save"


def proposal(text: str, asker: str) -> tuple[str, list[dict[str, Any]]]:
    """A note the model proposes after a correction, with Save for the person who made it.
    The button carries the note and who may save it; the click is checked again."""
    said = f"*Save this for the channel?*\n> {escape(fit(text, NOTE_MAX))}"
    said += f"\n_Only <@{asker}> can save it. Later runs in this channel will read it._"
    button = {
        "type": "button",
        "action_id": SAVE_ACTION,
        "style": "primary",
        # unescaped: a note in another script stays within a value's 2,000 characters
        "value": json.dumps({"by": asker, "text": text}, ensure_ascii=False),
        "text": {"type": "plain_text", "text": "Save"},
    }
    return "Save this for the channel?", [section(said), {"type": "actions", "elements": [button]}]


def saved(text: str, by: str) -> str:
    return f"Saved for this channel by <@{by}>:\n> {escape(fit(text, NOTE_MAX))}"
