"""Configuration: one typed object, read once from the environment and `.env`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.errors import ConfigError

DEFAULT_MODEL = "claude-sonnet-5-5"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    # agent: thread status and one streamed message per run; classic: a message per step
    slack_ui: Literal["agent", "classic"] = "agent"

    # Read by the anthropic SDK itself too; kept here so secrets can be scrubbed and checked.
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = DEFAULT_MODEL
    anthropic_max_retries: int = Field(default=2, ge=0, le=10)
    max_output_tokens: int = Field(default=16_000, ge=256, le=128_000)
    prompt_caching: bool = True
    model_retry_attempts: int = Field(default=4, ge=1, le=10)
    model_retry_delay_s: float = Field(default=1.0, ge=0)

    sandbox_backend: Literal["buddy", "local"] | None = None
    sandbox_root: Path = Path("/tmp/slack-code-interpreter/sandboxes")
    sandbox_tag: str = "slack-code-interpreter"
    spool_dir: Path = Path("/tmp/slack-code-interpreter/spool")  # files on their way in

    buddy_token: SecretStr | None = None
    buddy_workspace: str | None = None
    buddy_project: str | None = None
    buddy_api_url: str | None = None
    buddy_region: Literal["US", "EU", "AS", "AP"] = "US"  # AP: older name of AS
    buddy_resources: str = Field(default="1x2", pattern=r"^\d{1,2}x\d{1,2}$")
    buddy_sandbox_timeout: int = Field(default=900, ge=60)  # Buddy's inactivity auto-stop
    buddy_snapshot: str | None = None
    buddy_ready_timeout_s: float = Field(default=300, gt=0)
    buddy_retry_delay_s: float = Field(default=1.0, ge=0)  # first backoff of a retried read
    sandbox_setup_command: str | None = None
    orphan_cleanup: bool = True
    orphan_sweep_interval_s: float = Field(default=600, gt=0)
    orphan_min_age_s: float = Field(default=600, ge=0)  # spare sandboxes still booting

    session_idle_timeout: float = Field(default=900, gt=0)
    # On idle: delete the sandbox, or stop it and keep it (files and all) this long.
    session_idle_action: Literal["delete", "stop"] = "delete"
    session_retain_s: float = Field(default=86_400, gt=0)
    sandbox_network: bool = False  # model-written code may reach the network (Buddy only)
    store_path: Path = Path("sessions.db")  # SQLite: sessions, history, files, audit
    shutdown_grace_s: float = Field(default=20, ge=0)  # inside a platform's usual 30 s
    allowed_channels: str = ""  # comma-separated Slack ids; empty: every channel
    allowed_users: str = ""  # comma-separated Slack user ids; empty: everyone
    allow_dms: bool = True
    max_file_bytes: int = Field(default=200 << 20, gt=0)
    max_files_per_thread: int = Field(default=20, gt=0)
    repo_hosts: str = ""  # comma-separated host names /analyze may fetch from; empty: any
    slack_rate_scale: float = Field(default=1.0, gt=0)  # times Slack's rate tiers (pacing.py)
    max_turns: int = Field(default=15, ge=1, le=200)
    max_cost_usd_per_run: float = Field(default=2.0, gt=0)
    max_cost_usd_per_thread: float = Field(default=10.0, gt=0)
    max_cost_usd_per_user_day: float = Field(default=25.0, gt=0)
    tool_timeout_s: int = Field(default=120, ge=1, le=3600)
    tool_output_chars: int = Field(default=8_000, ge=500, le=200_000)

    @model_validator(mode="after")
    def _pick_backend(self) -> Settings:
        if self.sandbox_backend is None:
            self.sandbox_backend = "buddy" if self.buddy_token else "local"
        return self

    @staticmethod
    def id_list(value: str) -> frozenset[str]:
        return frozenset(part.strip() for part in value.split(",") if part.strip())

    @property
    def backend(self) -> Literal["buddy", "local"]:
        assert self.sandbox_backend is not None
        return self.sandbox_backend

    def secret_values(self) -> list[str]:
        """Every configured secret, for scrubbing output before it leaves the process."""
        secrets = (self.slack_bot_token, self.slack_app_token, self.anthropic_api_key)
        return [s.get_secret_value() for s in (*secrets, self.buddy_token) if s]


def load_settings(**overrides: object) -> Settings:
    """Read the settings once; a bad value becomes one ConfigError line naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    name = str(first["loc"][0]).upper() if first["loc"] else "settings"
    value = first.get("input")
    shown = "" if isinstance(value, dict) else f" (got {str(value)[:40]!r})"
    return (
        f"Configuration error: {name}: {first['msg']}{shown}. "
        f"Set {name} in the environment or in .env."
    )
