"""The model's `propose_note`: when someone corrects it about what the team means ("no, we
count refunds out"), it may propose a note for the channel. Nothing is saved here: the
person who asked sees the note with a Save button (the front end's part)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DESCRIPTION = (
    "Propose a note for this channel's memory when the person corrects you about what their "
    'team means by a word or how it counts something ("no, revenue is net of refunds"). '
    "Write the note as a short, standalone definition. The person sees it with a Save "
    "button; it is saved only if they press it, and later runs in the channel read it. Never "
    "put data values, personal details or secrets in a note."
)


class ProposeNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=1000, description="The note, one definition.")


def proposed() -> str:
    return (
        "Proposed. The person now sees the note with a Save button; it is saved only if they "
        "press it. Mention it in one line."
    )
