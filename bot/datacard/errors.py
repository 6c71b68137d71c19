"""Why a file gets no card: its bytes are not the data they claim to be, or are unsafe to open."""

from __future__ import annotations

from bot.errors import BotError


class CardError(BotError):
    """A file refused by its content (a zip or gzip bomb, an archive that is not a workbook, a
    PDF posing as CSV...). The message names the file and says why; it is safe to show."""
