"""The model's `load_definition`: the code of a step the channel saved under a name, to run
again instead of re-deriving a figure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field

DESCRIPTION = (
    "Load the code of one of this channel's saved definitions (listed in the system prompt) "
    "by its name, to run it on today's data."
)
Loader = Callable[[str], Awaitable[str | None]]  # a name -> the definition as text, or None


class LoadDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="The definition's name, as listed.")
