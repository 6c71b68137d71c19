"""Cards of whole files (workbooks, Parquet) computed in the cards' own pool within their
time budget, and the card that stands for a profile given up."""

from __future__ import annotations

from pathlib import Path

from bot.datacard import budget
from bot.datacard.card import DataCard
from bot.datacard.errors import CardError
from bot.datacard.parquet import card_parquet
from bot.datacard.xlsx import card_xlsx


def given_up(name: str, kind: str, over: budget.OverBudget) -> DataCard:
    """A card that says why there is no profile; the file itself is taken in."""
    return DataCard(name, kind, rows=None, notes=[over.note])


async def card_file(kind: str, path: Path, name: str) -> list[DataCard]:
    """Check a spooled workbook or Parquet file and profile it, off the event loop and out of
    its default executor. Raises CardError for a file refused. A card past its budget is
    given up (the file is taken in); one that never got a thread refuses the file, since
    a workbook not checked for zip bombs must not reach the sandbox."""
    try:
        return await budget.run(_card, kind, path, name)
    except budget.OverBudget as over:
        if not over.started:
            why = "the bot is too busy checking other files; send it again in a while"
            raise CardError(f"Skipped {name}: {why}.") from None
        return [given_up(name, kind, over)]


def _card(kind: str, path: Path, name: str) -> list[DataCard]:
    return card_xlsx(path, name) if kind == "xlsx" else [card_parquet(path, name)]
