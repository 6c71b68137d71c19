"""The store and the process: SQLite or Redis, replicas, shutdown, monitoring and retention."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator

REDIS_SCHEMES = ("redis", "rediss", "unix")


class StoreSettings(BaseModel):
    run_end_attempts: int = Field(
        default=5,
        ge=1,
        le=20,
        description=(
            "how often a run's end is written to the store before giving up (a Redis blip, a "
            "locked SQLite), and the first wait between tries (doubling, at most 8 s)"
        ),
    )
    run_end_retry_delay_s: float = Field(
        default=0.5,
        ge=0,
        description=(
            "how often a run's end is written to the store before giving up (a Redis blip, a "
            "locked SQLite), and the first wait between tries (doubling, at most 8 s)"
        ),
    )
    run_repair_grace_s: float = Field(
        default=60,
        ge=0,
        description=(
            "a run the store has in flight that no task in this process runs (its end could not "
            "be written) is ended as interrupted by the reaper once it is this old, so its "
            "thread can be reaped"
        ),
    )
    store_path: Path = Field(
        default=Path("sessions.db"),
        description="the SQLite file with sessions, conversations, files and the tool calls' audit",
    )
    redis_url: str | None = Field(
        default=None,
        description=(
            "keep the store in this Redis instead (`redis://`, `rediss://` or `unix://`, a "
            "password in the URL), for several replicas; needs Buddy sandboxes, see "
            "[Redis](operations.md#redis)"
        ),
        json_schema_extra={"shown": "unset: SQLite"},
    )
    replica_lease_s: float = Field(
        default=15,
        ge=1,
        description=(
            "with replicas, how long a thread's lease outlives its holder's last renewal (a "
            "dead or cut-off replica's threads are taken over after this)"
        ),
    )
    shutdown_grace_s: float = Field(
        default=20,
        ge=0,
        description="on SIGTERM, how long running turns may take to finish",
    )
    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description=(
            "serve `/healthz` and Prometheus `/metrics` on this port, see "
            '[Monitoring](operations.md#monitoring); 1 to 65535 (no 0 for "any free port": '
            "probes and scrapers must know the port)"
        ),
        json_schema_extra={"shown": "unset: not served"},
    )
    metrics_host: str = Field(
        default="0.0.0.0",
        description=(
            "the address they listen on. All interfaces by default, so that a load balancer's "
            "or orchestrator's probes and Prometheus reach the process inside a container; "
            "`127.0.0.1` keeps them on the machine. They show no secrets, user ids or message "
            "text"
        ),
    )
    session_retention_days: float = Field(
        default=90,
        ge=0,
        description=(
            "a session that is done (no sandbox, no run going) and quiet this many days is "
            "deleted with all it holds (conversation, files, runs, audit); 0 keeps sessions "
            "forever"
        ),
    )
    audit_retention_days: float = Field(
        default=90,
        ge=0,
        description=(
            "a run is deleted with its turns, tool calls and feedback this many days after it "
            "ended (a thread's recorded cost then counts the turns kept); 0 keeps them forever"
        ),
    )
    prune_interval_s: float = Field(
        default=3600,
        gt=0,
        description=(
            "how often the bot prunes what retention says is done (one replica at a time; "
            "`python -m bot sessions prune` does it now). On Redis a thread's keys also expire "
            "by themselves, the longer retention plus `SESSION_IDLE_TIMEOUT` and "
            "`SESSION_RETAIN_S` after their last write"
        ),
    )

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _blank_port_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        if value and urlsplit(value).scheme not in REDIS_SCHEMES:
            raise ValueError("use a redis://, rediss:// or unix:// URL")
        return value or None
