"""Benchmark: the prompt tokens a channel's notes add to every run, at the cap.

Run from the repository root: `.venv/bin/python -m bench.memory_tokens`.
A channel holds its maximum of notes (50 by default), each as long as a note may be (500
characters), so the cap (CHANNEL_NOTES_PROMPT_CHARS, 4,000 by default) decides how many a
run gets. The same question runs with and without them against the fake Messages API,
whose usage counts tokens as characters / 4; the difference is what the notes cost.
"""

from __future__ import annotations

import asyncio
import time

from bench import sandbox_root
from bot.compose import Runtime
from bot.memory.notes import chosen, prompt_section
from bot.settings.memory import MemorySettings
from bot.store.base import NoteRecord
from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.support import Recorder, settings_for

QUESTION = "What was revenue last quarter?"


def notes(settings: MemorySettings) -> list[NoteRecord]:
    filler = "Revenue means net of refunds and discounts, counted when the invoice is paid. "
    body = (filler * 10)[: settings.channel_note_max_chars - 12]
    return [
        NoteRecord(f"n{i}", "T:C", f"note {i:03d}: {body}", "U1", time.time() + i)
        for i in range(settings.channel_notes_max)
    ]


async def prompt_tokens(with_notes: bool) -> tuple[int, int]:
    """(input tokens of the run's first request, characters of the notes section)."""
    async with FakeAnthropic(lambda req: Reply([text("ok")])) as fake:
        with sandbox_root() as root:
            settings = settings_for(fake.base_url, root)
            section = prompt_section(
                chosen(notes(settings), QUESTION, settings.channel_notes_prompt_chars)
            )

            async def context(_key: str, _question: str) -> str:
                return section if with_notes else ""

            runtime = Runtime.from_settings(settings, context=context)
            session = runtime.sessions.new("bench-notes")
            try:
                await session.ask(QUESTION, Recorder())
            finally:
                await session.close()
                await runtime.close()
            body = fake.requests[0].body  # what the first request sent
            sent = len(str(body.get("system"))) + len(str(body.get("messages")))
            return sent // 4, len(section) if with_notes else 0


async def main() -> None:
    bare, _ = await prompt_tokens(False)
    full, chars = await prompt_tokens(True)
    settings = MemorySettings()
    print(
        f"{settings.channel_notes_max} notes of {settings.channel_note_max_chars} characters; "
        f"cap {settings.channel_notes_prompt_chars:,} characters"
    )
    print(f"  notes section:            {chars:,} characters")
    print(f"  first request, no notes:  ~{bare:,} tokens (system and messages, chars / 4)")
    print(f"  first request, notes:     ~{full:,} tokens")
    print(f"  added by the notes:       ~{full - bare:,} tokens per run")


if __name__ == "__main__":
    asyncio.run(main())
