"""What Slack's assistant style keeps for a process, shared by the listeners and the runs'
views: the workspaces that refused it, the first sign a question gets (the thread's status,
set before anything else happens), and the notes on files that came with a question,
held for the run that answers it so that they show in its message rather than as posts."""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from bot.slack.render.file_notes import FileNote
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackError, SlackRefused

log = logging.getLogger(__name__)

STATUS = "is analyzing your data…"


# Offered when someone opens the bot's Messages tab (the manifest lists the same).
SUGGESTED_PROMPTS = [
    {
        "title": "Explore a file",
        "message": "What is in this file? Summarise it and point out anything odd.",
    },
    {
        "title": "Find the biggest changes",
        "message": "Which rows changed the most between the first and the last year?",
    },
    {
        "title": "Chart a trend",
        "message": "Chart the trend over time and tell me what stands out.",
    },
]


class AssistantThreads:
    def __init__(self, web: SlackWeb) -> None:
        self.web = web
        self._refused: set[str] = set()
        self._signed: dict[tuple[str, str], float] = {}  # thread -> when its status was set
        self._held: defaultdict[str, list[FileNote]] = defaultdict(list)

    def allowed(self, team: str) -> bool:
        return team not in self._refused

    def refuse(self, team: str, error: str) -> None:
        if team not in self._refused:
            self._refused.add(team)
            log.warning("workspace %s refused streaming or status (%s); classic view", team, error)

    async def set_status(self, ref: ThreadRef, loading: list[str]) -> bool:
        """The thread's status, naming what happens in `loading`. False when the workspace
        refuses it (remembered); other errors are logged."""
        try:
            await self.web.set_status(ref.channel, ref.ts, STATUS, loading)
        except SlackRefused as exc:
            self.refuse(ref.team, exc.code)
            return False
        except SlackError as exc:
            log.warning("could not set the thread status: %s", exc.code)
            return True
        self._signed[(ref.channel, ref.ts)] = time.monotonic()
        return True

    async def clear_status(self, ref: ThreadRef) -> None:
        try:
            await self.web.set_status(ref.channel, ref.ts, "")
        except SlackError as exc:
            log.warning("could not clear the thread status: %s", exc.code)
        self._signed.pop((ref.channel, ref.ts), None)

    def status_showing(self, ref: ThreadRef) -> bool:
        """Whether the status set last is still up: no reply from the bot since (a reply
        clears it)."""
        signed = self._signed.get((ref.channel, ref.ts))
        return signed is not None and signed > self.web.replied_at(ref.channel, ref.ts)

    def hold(self, key: str, notes: list[FileNote]) -> None:
        """Notes on files for the next run of the thread to show (as tasks)."""
        self._held[key] += notes

    def claim(self, key: str) -> list[FileNote]:
        return self._held.pop(key, [])
