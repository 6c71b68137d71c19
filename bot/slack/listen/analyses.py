"""`/analyze <repository> [question]`: the repository checked at once (the command's
ephemeral answer says what is wrong), then the thread started in the background (the ack
may not wait for it)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from bot.errors import BotError
from bot.sessions.engine import Engine
from bot.sessions.repo import check_repo_url, check_resolves_public
from bot.slack.listen.policy import Policy
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackGone

log = logging.getLogger(__name__)

NOT_A_MEMBER = (
    "I'm not in this channel, so I can't post the analysis here. Invite me first "
    "(`/invite @` and my name), then run `/analyze` again."
)
EXPLORE = (
    "Explore the data files in the repository at /buddy/data: what they hold, their size "
    "and quality, and the key findings. Write the report."
)
USAGE = "Usage: `/analyze <https repository URL> [question]`"


class Analyses:
    def __init__(self, engine: Engine, web: SlackWeb, policy: Policy) -> None:
        self._engine, self._web, self._policy = engine, web, policy
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, command: dict[str, Any]) -> str | None:
        """Check the command's repository and start on it; returns an ephemeral error, or
        None. (Who may ask, and whether the engine takes work, is the listener's check.)"""
        url, _, question = (command.get("text") or "").strip().partition(" ")
        if not url:
            return USAGE
        try:
            rules = self._policy.repo_rules
            url = check_repo_url(url, self._policy.repo_hosts, rules.allowed, rules.ports)
            if self._policy.repo_lookup:  # on Buddy, Buddy resolves the name, not this host
                await check_resolves_public(url, rules)
        except BotError as exc:
            return f":warning: {exc}"
        task = asyncio.create_task(self._open(command, url, question.strip()))
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return None

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception():
            log.error("starting an analysis failed", exc_info=task.exception())

    async def _open(self, command: dict[str, Any], url: str, question: str) -> None:
        user, channel = command.get("user_id", ""), command["channel_id"]
        asked = f": {question}" if question else ""
        said = f"<@{user}> asked me to analyze {url}{asked}"
        try:
            ts = await self._web.post(channel, None, said)
        except SlackGone:  # slash commands work in channels the bot is not in
            log.info("/analyze in %s, which the bot is not in: told %s", channel, user)
            await self._web.respond(command.get("response_url", ""), NOT_A_MEMBER)
            return
        ref = ThreadRef(command.get("team_id", ""), channel, ts)
        await self._engine.ask(ref.key, question or EXPLORE, user=user, repo_url=url)
