"""Files that come with a question, taken into the thread's session: checked against the
intake policy (count, size), streamed from Slack, and described in a note (its data
card, or why it was refused) for the thread or the run's plan."""

from __future__ import annotations

from typing import Any

from bot.datacard import for_slack
from bot.datacard.data_file import DataFile
from bot.errors import BotError
from bot.sessions.engine import Engine
from bot.sessions.files import FileRejected, checked
from bot.sessions.run import error_ref
from bot.slack.listen.files import SlackFiles
from bot.slack.listen.policy import Policy
from bot.slack.render.file_notes import FileNote, file_note, intake_note, safe_display
from bot.slack.threads import ThreadRef
from bot.units import size_text


class FileIntake:
    def __init__(self, engine: Engine, files: SlackFiles, policy: Policy) -> None:
        self._engine, self._files, self._policy = engine, files, policy

    async def take(self, ref: ThreadRef, file: dict[str, Any]) -> FileNote:
        """Take one file in; the note on it says how that went."""
        name = safe_display(file.get("name") or file.get("id", "file"))
        try:
            file = await self._files.resolve(file)  # a Slack Connect stub: its whole object
            name = safe_display(file.get("name") or file.get("id", "file"))
            taken = await self._add(ref, file, name)
        except BotError as exc:
            return file_note(f":no_entry_sign: {exc}", f"Skipped {name}", str(exc), ok=False)
        except Exception as exc:
            said = f"Could not read {name} (ref {error_ref(exc, f'taking in {name}')})."
            return file_note(f":warning: {said}", f"Could not read {name}", said, ok=False)
        text = intake_note(name, taken)
        card = "\n".join(for_slack(card) for card in taken.cards) or size_text(taken.size)
        return file_note(text, f"Read {name}", f"→ {taken.path}\n{card}", ok=True)

    async def _add(self, ref: ThreadRef, file: dict[str, Any], name: str) -> DataFile:
        # No refusal by name: the file's bytes tell its kind (`intake.prepare`).
        if await self._engine.file_count(ref.key) >= self._policy.max_files:
            raise FileRejected(
                f"Skipped {name}: this thread already has {self._policy.max_files} files."
            )
        if int(file.get("size") or 0) > self._policy.max_file_bytes:
            limit = self._policy.max_file_bytes >> 20
            raise FileRejected(f"Skipped {name}: it is larger than {limit} MB.")
        limit = self._policy.max_file_bytes
        opener = lambda f=file: checked(self._files.stream(f), name, limit)  # noqa: E731
        return await self._engine.add_file(ref.key, str(file.get("name") or name), opener, file)
