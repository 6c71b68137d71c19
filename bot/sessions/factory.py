"""Makes sessions: a sandbox spec, an agent with its toolbox, and the callbacks the engine
wants to hear from, all given when the session is built."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic

from bot.agent.context import ContextConfig, ContextEditing
from bot.agent.definition_tool import Loader
from bot.agent.loop import Agent, AgentConfig, Checkpoint
from bot.agent.model_client import RetryPolicy
from bot.agent.model_limits import ModelLimits
from bot.agent.sql_tools import SqlDesk
from bot.agent.tools import SandboxGetter, Toolbox
from bot.errors import ConfigError
from bot.sandbox.base import SandboxProvider
from bot.scrub import Scrubber
from bot.sessions.outputs import OutputCaps
from bot.sessions.session import Claim, ExtraContext, Session
from bot.settings import Settings
from bot.sql.config import Scope
from bot.sql.databases import Databases

SandboxChanged = Callable[[str | None], Awaitable[None]]
ContextFor = Callable[[str, str], Awaitable[str]]  # (key, question) -> prompt text
DefinitionFor = Callable[[str, str], Awaitable[str | None]]  # (key, name) -> its text


def operator_instructions(path: Path | None) -> str:
    """The operator's instructions, read once at start (a file that cannot be read stops
    the bot with one line)."""
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"OPERATOR_INSTRUCTIONS_FILE {path}: {exc}") from None


def session_tag(key: str) -> str:
    """A tag naming the session, in characters any backend accepts."""
    return "session-" + hashlib.sha256(key.encode()).hexdigest()[:12]


class SessionFactory:
    def __init__(
        self,
        settings: Settings,
        client: anthropic.AsyncAnthropic,
        provider: SandboxProvider,
        databases: Databases,
        scope: Scope,
        context: ContextFor | None = None,
        definitions: DefinitionFor | None = None,
    ) -> None:
        """`databases`: the SQL connections; `scope`: which of them a session may use;
        `context`: what the front end adds to each run's system prompt (channel notes)."""
        self._context = context
        self._definitions = definitions
        self._settings = settings
        self.databases = databases
        self._scope = scope
        self._client = client
        self.provider = provider
        self.limits = ModelLimits(client, settings.anthropic_model)  # looked up once, lazily
        # What the endpoint does for long threads, learnt once per process.
        self.context = (
            None
            if settings.context_editing == "off"
            else ContextEditing(
                ContextConfig(
                    settings.context_editing,
                    settings.context_clear_tokens,
                    settings.context_compact_tokens,
                    settings.context_keep_tool_uses,
                )
            )
        )
        self.scrubber = Scrubber(settings.secret_values() + databases.connections.secrets())
        # A booted sandbox for a new thread, if one is ready (the warm pool, once it runs).
        self.claim: Claim | None = None
        self.instructions = operator_instructions(settings.operator_instructions_file)

    def new(
        self,
        key: str,
        repo_url: str | None = None,
        *,
        history: list[dict[str, Any]] | None = None,
        checkpoint: Checkpoint | None = None,
        on_sandbox: SandboxChanged | None = None,
    ) -> Session:
        """A session for `key`, continuing `history`; `checkpoint` hears every change to the
        history and `on_sandbox` every change of sandbox."""
        return Session(
            key,
            self.provider,
            lambda sandbox: self._agent(key, sandbox, history, checkpoint),
            repo_url=repo_url,
            tags=(self._settings.sandbox_tag, session_tag(key)),
            spool_dir=self._settings.spool_dir,
            output_caps=OutputCaps(
                self._settings.output_file_max_bytes, self._settings.output_total_max_bytes
            ),
            on_sandbox=on_sandbox,
            extra_context=self._extra_for(key),
            claim=self.claim,
            warm_imports=self._settings.warm_imports,
        )

    def _loader(self, key: str) -> Loader | None:
        definitions = self._definitions
        if definitions is None:
            return None

        async def load(name: str) -> str | None:
            return await definitions(key, name)

        return load

    def _extra_for(self, key: str) -> ExtraContext | None:
        context = self._context
        if context is None:
            return None

        async def extra(question: str) -> str:
            return await context(key, question)

        return extra

    def _agent(
        self,
        key: str,
        sandbox: SandboxGetter,
        history: list[dict[str, Any]] | None,
        checkpoint: Checkpoint | None,
    ) -> Agent:
        s = self._settings
        config = AgentConfig(
            model=s.anthropic_model,
            max_turns=s.max_turns,
            max_output_tokens=s.max_output_tokens,
            retry=RetryPolicy(s.model_retry_attempts, s.model_retry_delay_s),
            prompt_caching=s.prompt_caching,
            instructions=self.instructions,
        )
        toolbox = Toolbox(
            sandbox,
            default_timeout_s=min(60, s.tool_timeout_s),
            max_timeout_s=s.tool_timeout_s,
            default_wait_s=s.command_wait_s,
            output_chars=s.tool_output_chars,
            scrubber=self.scrubber,
            definitions=self._loader(key),
            schedule_min_interval_s=(
                s.schedule_min_interval_s if self._scope.place_of(key) is not None else None
            ),
            sql=SqlDesk(
                self.databases,
                self._scope.allowed(self.databases.connections, key),
                self.scrubber,
            ),
        )
        return Agent(
            self._client,
            config,
            toolbox,
            history=history,
            checkpoint=checkpoint,
            limits=self.limits,
            context=self.context,
        )
