"""A file a session took in: where it is in the sandbox, its size, its first line and its
data cards, and how the model is told about it."""

from __future__ import annotations

from dataclasses import dataclass

from bot.datacard.card import DataCard
from bot.datacard.render import cards_for_model

CARD_TOKENS = 600  # the most a file's card may take in the prompt


@dataclass(frozen=True)
class DataFile:
    """A file the session took in, as the model is told about it."""

    path: str
    size: int
    header: str  # the first line, for CSV-like files
    cards: tuple[DataCard, ...] = ()  # what it holds (a workbook: one per sheet)

    def describe(self, card_tokens: int = CARD_TOKENS) -> str:
        lines = [f"- {self.path} ({self.size:,} bytes)"]
        if self.header:
            lines.append(f"  first line: {self.header[:300]}")
        if self.cards:
            card = cards_for_model(list(self.cards), card_tokens)
            lines += ["  " + line for line in card.splitlines()]
        return "\n".join(lines)
