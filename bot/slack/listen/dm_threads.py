"""Direct-message threads in Slack's agent and assistant views: a thread titled after its
first question, and the suggested prompts of the bot's Messages tab. Both are extras: a
workspace that refuses them loses nothing else."""

from __future__ import annotations

import logging

from bot.slack.threads import ThreadRef
from bot.slack.view.assistant_threads import SUGGESTED_PROMPTS
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackError

log = logging.getLogger(__name__)
TITLE_MAX = 60


class DmThreads:
    def __init__(self, web: SlackWeb) -> None:
        self._web = web
        self._prompted: set[str] = set()  # DMs whose Messages tab has its prompts

    async def title(self, ref: ThreadRef, question: str) -> None:
        """A DM thread is titled after its first question."""
        title = " ".join(question.split())
        try:
            await self._web.set_title(ref.channel, ref.ts, title[:TITLE_MAX])
        except SlackError as exc:
            log.info("could not title the thread: %s", exc.code)

    async def prompt_once(self, channel: str) -> None:
        """The Messages tab's prompts, once per DM in this process."""
        if channel not in self._prompted:
            self._prompted.add(channel)
            await self.suggest(channel, None)

    async def suggest(self, channel: str, thread_ts: str | None) -> None:
        try:
            await self._web.suggest(channel, thread_ts, SUGGESTED_PROMPTS)
        except SlackError as exc:
            log.info("could not offer the suggested prompts: %s", exc.code)
