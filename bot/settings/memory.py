"""Channel memory: how many notes a channel keeps, how long one may be, and how much of them
a run's prompt takes."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class MemorySettings(BaseModel):
    operator_instructions_file: Path | None = Field(
        default=None,
        description=(
            'a text file of instructions for every run in the workspace ("amounts are in '
            'EUR unless a column says otherwise"); they rank above channel notes'
        ),
    )
    memory_editors: str = Field(
        default="",
        description="user ids (comma-separated) who may forget any channel note, beside its saver",
    )
    channel_notes_max: int = Field(default=50, ge=0, description="notes one channel may keep")
    channel_note_max_chars: int = Field(
        default=500, ge=1, description="characters of one channel note"
    )
    channel_notes_prompt_chars: int = Field(
        default=4000,
        ge=0,
        description=(
            "characters of a channel's notes in a run's system prompt; past it, the notes "
            "that match the question, then the newest, are given"
        ),
    )
