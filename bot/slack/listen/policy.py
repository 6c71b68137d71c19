"""Who may use the bot, where, and how much data they may give it (budgets are the
engine's: `bot/sessions/budget.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.compose import repo_rules
from bot.sandbox.repo_net import NO_RULES, FetchRules
from bot.settings import Settings

NOT_HERE = "Sorry, I'm not enabled in this channel. Ask an admin to add it, or try another one."
NOT_YOU = "Sorry, I only work for a list of people here, and you're not on it yet."
NOT_YOURS = "Only <@{asker}> (who asked) can stop this run."
NO_DMS = "Sorry, I don't work in direct messages here: mention me in a channel instead."


@dataclass(frozen=True)
class Policy:
    channels: frozenset[str] = field(default_factory=frozenset)  # empty: any
    users: frozenset[str] = field(default_factory=frozenset)  # empty: anyone
    allow_dms: bool = True
    stop_by_anyone: bool = False  # else only a run's asker may stop it
    max_file_bytes: int = 200 << 20
    max_files: int = 20
    repo_hosts: frozenset[str] = field(default_factory=frozenset)  # empty: any public host
    repo_rules: FetchRules = NO_RULES  # which addresses and ports a repository may have
    # Whether the bot looks the repository's host up before starting: only where it fetches
    # the repository itself (local). Buddy fetches it, so a lookup here proves nothing there,
    # and fails where this host resolves nothing itself (behind a proxy).
    repo_lookup: bool = True
    schedule_editors: frozenset[str] = field(default_factory=frozenset)  # beside each owner
    memory_editors: frozenset[str] = field(default_factory=frozenset)  # beside each saver

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        return cls(
            channels=Settings.id_list(settings.allowed_channels),
            users=Settings.id_list(settings.allowed_users),
            allow_dms=settings.allow_dms,
            stop_by_anyone=settings.stop_by_anyone,
            max_file_bytes=settings.max_file_bytes,
            max_files=settings.max_files_per_thread,
            repo_hosts=Settings.id_list(settings.repo_hosts),
            repo_rules=repo_rules(settings),
            repo_lookup=settings.backend == "local",
            schedule_editors=Settings.id_list(settings.schedule_editors),
            memory_editors=Settings.id_list(settings.memory_editors),
        )

    def refusal(self, channel: str, user: str) -> str | None:
        """Why this user may not use the bot in this channel, or None if they may."""
        if channel.startswith("D"):
            if not self.allow_dms:
                return NO_DMS
        elif self.channels and channel not in self.channels:
            return NOT_HERE
        if self.users and user not in self.users:
            return NOT_YOU
        return None

    def stop_refusal(self, channel: str, user: str, asker: str) -> str | None:
        """Why this user may not stop a run `asker` asked for, or None if they may."""
        refusal = self.refusal(channel, user)
        if refusal or self.stop_by_anyone or not asker or user == asker:
            return refusal
        return NOT_YOURS.format(asker=asker)
