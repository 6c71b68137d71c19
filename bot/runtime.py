"""What a running bot holds once: settings, the model client, the sandbox provider."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import anthropic

from bot.agent.loop import Agent, AgentConfig
from bot.agent.model import RetryPolicy, build_client
from bot.agent.tools import SandboxGetter, Toolbox
from bot.sandbox.base import SandboxProvider
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from bot.sandbox.local import LocalProvider
from bot.scrub import Scrubber
from bot.sessions.orphans import OrphanSweeper
from bot.sessions.session import Session
from bot.settings import Settings


def build_provider(settings: Settings) -> SandboxProvider:
    if settings.backend == "buddy":
        return BuddyProvider(BuddyConfig.from_settings(settings))
    return LocalProvider(settings.sandbox_root)


def session_tag(key: str) -> str:
    """A tag naming the session, in characters any backend accepts."""
    return "session-" + hashlib.sha256(key.encode()).hexdigest()[:12]


@dataclass
class Runtime:
    settings: Settings
    client: anthropic.AsyncAnthropic
    provider: SandboxProvider

    @property
    def scrubber(self) -> Scrubber:
        return Scrubber(self.settings.secret_values())

    @classmethod
    def from_settings(cls, settings: Settings) -> Runtime:
        return cls(settings, build_client(settings), build_provider(settings))

    _sessions: weakref.WeakSet[Session] = field(default_factory=weakref.WeakSet)

    def new_session(self, key: str, repo_url: str | None = None) -> Session:
        tags = (self.settings.sandbox_tag, session_tag(key))
        session = Session(
            key,
            self.provider,
            self._make_agent,
            repo_url=repo_url,
            tags=tags,
            spool_dir=self.settings.spool_dir,
        )
        self._sessions.add(session)
        return session

    def owned_sandbox_ids(self) -> set[str]:
        """Sandboxes that live sessions of this process hold."""
        return {s.sandbox_id for s in list(self._sessions) if s.sandbox_id}

    def orphan_sweeper(self, owned: Callable[[], set[str]] | None = None) -> OrphanSweeper:
        """`owned`: the sandboxes to spare (default: those of this process's sessions)."""
        s = self.settings
        return OrphanSweeper(
            self.provider,
            s.sandbox_tag,
            owned or self.owned_sandbox_ids,
            interval_s=s.orphan_sweep_interval_s,
            min_age_s=s.orphan_min_age_s,
        )

    def _make_agent(self, sandbox: SandboxGetter) -> Agent:
        s = self.settings
        config = AgentConfig(
            model=s.anthropic_model,
            max_turns=s.max_turns,
            max_output_tokens=s.max_output_tokens,
            retry=RetryPolicy(s.model_retry_attempts, s.model_retry_delay_s),
            prompt_caching=s.prompt_caching,
        )
        toolbox = Toolbox(
            sandbox,
            default_timeout_s=min(60, s.tool_timeout_s),
            max_timeout_s=s.tool_timeout_s,
            output_chars=s.tool_output_chars,
            scrubber=self.scrubber,
        )
        return Agent(self.client, config, toolbox)

    async def close(self) -> None:
        await self.provider.close()
        await self.client.close()
