"""Configuration: one typed object, read once from the environment and `.env`."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.errors import ConfigError
from bot.folders import state_dir
from bot.networks import parse_networks, parse_ports

DEFAULT_MODEL = "claude-sonnet-5-5"
REDIS_SCHEMES = ("redis", "rediss", "unix")
# Settings whose value may hold a password: an error about them does not echo it.
_NOT_ECHOED = frozenset({"redis_url"})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    slack_bot_token: SecretStr | None = None
    slack_app_token: SecretStr | None = None
    slack_api_url: str = "https://slack.com/api/"
    # Origins besides Slack's own a file download may be redirected to, without the token:
    # a test stand-in for Slack's CDN (comma-separated, e.g. http://127.0.0.2:8002). Empty:
    # Slack's https hosts only.
    slack_cdn_origins: str = ""
    # agent: thread status and one streamed message per run; classic: a message per step
    slack_ui: Literal["agent", "classic"] = "agent"

    # Read by the anthropic SDK itself too; kept here so secrets can be scrubbed and checked.
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    anthropic_model: str = DEFAULT_MODEL
    anthropic_max_retries: int = Field(default=2, ge=0, le=10)
    max_output_tokens: int = Field(default=16_000, ge=256, le=128_000)
    prompt_caching: bool = True
    # Long threads: server (the API's context-management betas), client (the bot clears and
    # summarises itself), auto (server where the endpoint has them) or off (sent whole).
    # Thresholds in prompt tokens; unset: half the window (at most 100,000) to clear, 1.5
    # times that to compact.
    context_editing: Literal["auto", "server", "client", "off"] = "auto"
    context_clear_tokens: int | None = Field(default=None, ge=1_000)
    context_compact_tokens: int | None = Field(default=None, ge=1_000)
    context_keep_tool_uses: int = Field(default=3, ge=0, le=100)
    model_retry_attempts: int = Field(default=4, ge=1, le=10)
    model_retry_delay_s: float = Field(default=1.0, ge=0)

    sandbox_backend: Literal["buddy", "local"] | None = None
    # The local backend's sandboxes and the files on their way in: under the bot's state
    # folder by default, never a shared one (folders.py), and checked to be the bot's own.
    sandbox_root: Path = Field(default_factory=lambda: state_dir() / "sandboxes")
    sandbox_tag: str = "slack-code-interpreter"
    sandbox_disk_bytes: int = Field(default=5 << 30, gt=0)  # a local session's files, at most
    sandbox_max_files: int = Field(default=200_000, gt=0)  # and their inodes, at most
    sandbox_memory_bytes: int = Field(default=8 << 30, gt=0)  # all of a local sandbox's memory
    sandbox_max_commands: int = Field(default=8, gt=0)  # detached commands at once, per sandbox
    max_sandboxes: int = Field(default=32, gt=0)  # live local sandboxes per bot process
    # A new sandbox over the cap is refused once no slot came free this long: in a burst the
    # first runs may take minutes (a channel takes one post a second), all the while busy.
    sandbox_wait_s: float = Field(default=300, ge=0)
    spool_dir: Path = Field(default_factory=lambda: state_dir() / "spool")
    # An answer's files (report.md, out/), counted as they read (a sparse file in full):
    # one over the first is left out, and the rest once they pass the second in all.
    output_file_max_bytes: int = Field(default=50 << 20, gt=0)
    output_total_max_bytes: int = Field(default=200 << 20, gt=0)

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

    # -- what one sandbox call may use (the local backend; output and the detached commands'
    # cap on Buddy too). A call: a bash, node or Python call, a kernel cell, or a detached
    # command, each with all the processes it starts.
    sandbox_cpu_s: int = Field(default=300, ge=1)  # CPU seconds, all its processes together
    sandbox_cpus: float | None = Field(default=None, gt=0)  # cores at once, where cgroups allow
    sandbox_process_memory_bytes: int = Field(default=4 << 30, ge=64 << 20)  # per process
    sandbox_processes: int = Field(default=256, ge=16)  # per sandbox (per uid)
    sandbox_file_bytes: int = Field(default=1 << 30, gt=0)  # one file, at most
    sandbox_open_files: int = Field(default=1024, ge=64)  # per process
    sandbox_output_bytes: int = Field(default=1 << 20, ge=1024)  # per stream kept
    sandbox_command_max_s: float = Field(default=6 * 3600, gt=0)  # a detached command's wall

    @field_validator("sandbox_cpus", mode="before")
    @classmethod
    def _blank_cpus_is_no_cap(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    session_idle_timeout: float = Field(default=900, gt=0)
    # On idle: delete the sandbox, or stop it and keep it (files and all) this long.
    session_idle_action: Literal["delete", "stop"] = "delete"
    session_retain_s: float = Field(default=86_400, gt=0)
    # A run's end is written with retries; one still unwritten is ended by the reaper once
    # the run is this old and no task runs it.
    run_end_attempts: int = Field(default=5, ge=1, le=20)
    run_end_retry_delay_s: float = Field(default=0.5, ge=0)
    run_repair_grace_s: float = Field(default=60, ge=0)
    sandbox_network: bool = False  # model-written code may reach the network (Buddy only)
    store_path: Path = Path("sessions.db")  # SQLite: sessions, history, files, audit
    redis_url: str | None = None  # set: the store is this Redis, shared by replicas
    # With replicas: a thread's lease lapses this long after its holder last renewed it (it
    # died, or was cut off); another replica may then take the thread over.
    replica_lease_s: float = Field(default=15, ge=1)
    shutdown_grace_s: float = Field(default=20, ge=0)  # inside a platform's usual 30 s
    allowed_channels: str = ""  # comma-separated Slack ids; empty: every channel
    allowed_users: str = ""  # comma-separated Slack user ids; empty: everyone
    allow_dms: bool = True
    # Stop: true lets anyone allowed to use the bot stop a run; false, only its asker.
    stop_by_anyone: bool = False
    max_file_bytes: int = Field(default=200 << 20, gt=0)
    max_files_per_thread: int = Field(default=20, gt=0)
    repo_hosts: str = ""  # comma-separated host names /analyze may fetch from; empty: any
    # Private addresses or networks a repository host may resolve to anyway (a git server
    # inside); empty: public addresses only.
    repo_allowed_addresses: str = ""
    repo_allowed_ports: str = "443,80"  # the ports a repository URL may name
    repo_max_bytes: int = Field(default=1 << 30, gt=0)  # a checkout, .git included
    slack_rate_scale: float = Field(default=1.0, gt=0)  # times Slack's rate tiers (pacing.py)
    max_turns: int = Field(default=15, ge=1, le=200)
    max_cost_usd_per_run: float = Field(default=2.0, gt=0)
    max_cost_usd_per_thread: float = Field(default=10.0, gt=0)
    max_cost_usd_per_user_day: float = Field(default=25.0, gt=0)
    tool_timeout_s: int = Field(default=120, ge=1, le=3600)
    # check_command's first wait on a command; each further one doubles, to tool_timeout_s
    command_wait_s: int = Field(default=30, ge=1, le=3600)
    tool_output_chars: int = Field(default=8_000, ge=500, le=200_000)
    # /healthz and /metrics; unset: not served. A fixed port, since probes must know it.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # All interfaces: a load balancer's probes and a scraper reach a container from outside.
    metrics_host: str = "0.0.0.0"

    # Retention: what the store keeps (0: forever). A session is done when it holds no
    # sandbox and no run is going; quiet this many days, it goes with all it holds. A run
    # goes with its tool calls and feedback this many days after it ended. Pruned every
    # PRUNE_INTERVAL_S (by one replica at a time); Redis keys also expire by themselves.
    session_retention_days: float = Field(default=90, ge=0)
    audit_retention_days: float = Field(default=90, ge=0)
    prune_interval_s: float = Field(default=3600, gt=0)

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _blank_port_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("repo_allowed_addresses")
    @classmethod
    def _addresses(cls, value: str) -> str:
        parse_networks(value)  # a bad one raises ValueError, reported naming the variable
        return value

    @field_validator("repo_allowed_ports")
    @classmethod
    def _ports(cls, value: str) -> str:
        parse_ports(value)
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if value and urlsplit(value).scheme not in REDIS_SCHEMES:
            raise ValueError("use a redis://, rediss:// or unix:// URL")
        return value or None

    @model_validator(mode="after")
    def _pick_backend(self) -> Settings:
        if self.sandbox_backend is None:
            self.sandbox_backend = "buddy" if self.buddy_token else "local"
        return self

    @model_validator(mode="after")
    def _shared_store_needs_shared_sandboxes(self) -> Settings:
        # With a shared store a session may move to another machine; a local sandbox cannot.
        if self.redis_url and self.sandbox_backend == "local":
            raise ValueError(
                "REDIS_URL is set but SANDBOX_BACKEND is local: replicas sharing a Redis need "
                "sandboxes every replica can reach. Use SANDBOX_BACKEND=buddy (with "
                "BUDDY_TOKEN, BUDDY_WORKSPACE and BUDDY_PROJECT), or unset REDIS_URL."
            )
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
        values = [s.get_secret_value() for s in (*secrets, self.buddy_token) if s]
        return values + _url_passwords(self.redis_url)


def load_settings(**overrides: object) -> Settings:
    """Read the settings once; a bad value becomes one ConfigError line naming the variable."""
    try:
        # overrides are checked by pydantic as the environment is: a bad one is a ConfigError
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    if not first["loc"]:  # a rule across settings: its message names them and the fix
        return f"Configuration error: {first.get('ctx', {}).get('error', first['msg'])}"
    name = str(first["loc"][0]).upper()
    value = first.get("input")
    hidden = isinstance(value, dict) or first["loc"][0] in _NOT_ECHOED
    shown = "" if hidden else f" (got {str(value)[:40]!r})"
    return (
        f"Configuration error: {name}: {first['msg']}{shown}. "
        f"Set {name} in the environment or in .env."
    )


def _url_passwords(url: str | None) -> list[str]:
    """A URL's password, as written and decoded (in the address, or a `password=` query)."""
    if not url:
        return []
    parts = urlsplit(url)
    password = parts.password or parse_qs(parts.query).get("password", [""])[0]
    return sorted({password, unquote(password)} - {""})
