"""Sandboxes: the backend (local or Buddy), their life, and what a repository fetch may reach."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

from bot.folders import state_dir
from bot.networks import parse_networks, parse_ports

BUDDY_ACCOUNT = (
    "Buddy token, workspace domain and project name "
    "(see [Buddy sandboxes](sandboxes.md#buddy-sandboxes))"
)
# above the usual /etc/subuid ranges' first block and any login user
DEFAULT_UID_BASE = 200_000


class SandboxSettings(BaseModel):
    sandbox_backend: Literal["buddy", "local"] | None = Field(
        default=None,
        description="`local` or `buddy`",
        json_schema_extra={"shown": "`buddy` when `BUDDY_TOKEN` is set, else `local`"},
    )
    sandbox_root: Path = Field(
        default_factory=lambda: state_dir() / "sandboxes",
        description=(
            "where the local backend keeps its sandboxes: made 0700 (0711 when the bot runs as "
            "root, so each sandbox's own uid can walk to its folders; every folder above it "
            "must let it through too); a symlink, or a folder of another user, stops the bot at "
            "start"
        ),
        json_schema_extra={
            "shown": (
                "`$XDG_STATE_HOME/slack-code-interpreter/sandboxes`, else "
                "`.state/slack-code-interpreter/sandboxes` in the working directory"
            )
        },
    )
    sandbox_uid_base: int = Field(
        default=DEFAULT_UID_BASE,
        ge=1000,
        description=(
            "(as root) the first of the 50,000 host uids sandboxes run as, one each; bots "
            "sharing a host with roots of their own take ranges apart"
        ),
    )
    sandbox_tag: str = Field(
        default="slack-code-interpreter",
        description="tag that marks the bot's sandboxes",
    )
    max_sandboxes: int = Field(
        default=32,
        gt=0,
        description=(
            "local sandboxes one bot process keeps alive at once (a stopped one does not "
            "count). At the cap, the sandbox of the thread used longest ago with no run going "
            "is shut down (or stopped, with `SESSION_IDLE_ACTION=stop`) as after its idle "
            "timeout, its thread told, and it resumes on its next message; only while every "
            "sandbox has a run going does a new one wait for a slot, until none has come free "
            "for this long (the thread is told it waits its turn, and Stop cancels), then the "
            "question fails with a message that says all are in use"
        ),
    )
    kernel_warm_imports: str = Field(
        default="numpy,pandas,matplotlib.pyplot",
        description=(
            "modules a new sandbox's Python kernel imports as soon as the sandbox runs, "
            "while the model thinks (comma-separated; a missing one is skipped). Empty: the "
            "kernel starts on the first Python call, as before"
        ),
    )
    warm_sandboxes: int = Field(
        default=0,
        ge=0,
        le=100,
        description=(
            "sandboxes kept booted, set up and with their kernel's imports made, for new "
            "threads to take at once (0: none). One replica refills the pool, within "
            "MAX_SANDBOXES; a thread with a repository to fetch boots its own. An idle "
            "pooled sandbox costs what a running one does"
        ),
    )
    sandbox_wait_s: float = Field(
        default=300,
        ge=0,
        description=(
            "local sandboxes one bot process keeps alive at once (a stopped one does not "
            "count). At the cap, the sandbox of the thread used longest ago with no run going "
            "is shut down (or stopped, with `SESSION_IDLE_ACTION=stop`) as after its idle "
            "timeout, its thread told, and it resumes on its next message; only while every "
            "sandbox has a run going does a new one wait for a slot, until none has come free "
            "for this long (the thread is told it waits its turn, and Stop cancels), then the "
            "question fails with a message that says all are in use"
        ),
    )
    spool_dir: Path = Field(
        default_factory=lambda: state_dir() / "spool",
        description=(
            "where uploads wait on their way into a sandbox: made 0700, checked like `SANDBOX_ROOT`"
        ),
        json_schema_extra={
            "shown": "`spool` beside the sandboxes' folder, under the same state folder"
        },
    )
    buddy_token: SecretStr | None = Field(
        default=None,
        description=BUDDY_ACCOUNT,
    )
    buddy_workspace: str | None = Field(
        default=None,
        description=BUDDY_ACCOUNT,
    )
    buddy_project: str | None = Field(
        default=None,
        description=BUDDY_ACCOUNT,
    )
    buddy_api_url: str | None = Field(
        default=None,
        description="API root, or region `US`, `EU`, `AS`",
        json_schema_extra={"shown": "the region's"},
    )
    buddy_region: Literal["US", "EU", "AS", "AP"] = Field(
        default="US",
        description="API root, or region `US`, `EU`, `AS`",
    )
    buddy_resources: str = Field(
        default="1x2",
        pattern=r"^\d{1,2}x\d{1,2}$",
        description="sandbox size (vCPU x GB) and Buddy's inactivity auto-stop in seconds",
    )
    buddy_sandbox_timeout: int = Field(
        default=900,
        ge=60,
        description="sandbox size (vCPU x GB) and Buddy's inactivity auto-stop in seconds",
    )
    buddy_snapshot: str | None = Field(
        default=None,
        description="a snapshot to start from, a first-boot command",
    )
    buddy_ready_timeout_s: float = Field(
        default=300,
        gt=0,
        description="how long to wait for a new sandbox to be ready",
    )
    buddy_retry_delay_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "the first backoff of a Buddy API read that is retried (a dropped connection, a "
            "5xx, a 429 without `Retry-After`); each further wait doubles"
        ),
    )
    sandbox_setup_command: str | None = Field(
        default=None,
        description="a snapshot to start from, a first-boot command",
    )
    orphan_cleanup: bool = Field(
        default=True,
        description=(
            "destroy the bot's sandboxes that no live session owns, how often, sparing ones "
            "younger than this"
        ),
    )
    orphan_sweep_interval_s: float = Field(
        default=600,
        gt=0,
        description=(
            "destroy the bot's sandboxes that no live session owns, how often, sparing ones "
            "younger than this"
        ),
    )
    orphan_min_age_s: float = Field(
        default=600,
        ge=0,
        description=(
            "destroy the bot's sandboxes that no live session owns, how often, sparing ones "
            "younger than this"
        ),
    )
    session_idle_timeout: float = Field(
        default=900,
        gt=0,
        description="seconds of quiet before a session's sandbox is destroyed (or stopped)",
    )
    session_idle_action: Literal["delete", "stop", "snapshot"] = Field(
        default="delete",
        description=(
            "what happens to a quiet thread's sandbox: `delete` it; `stop` it (processes "
            "end, files stay) and start it again on the thread's next message; or (Buddy) "
            "take a `snapshot` of its disk and delete it, the next message restoring "
            "/buddy/work as it was without uploading the files again"
        ),
    )
    buddy_snapshots_max: int = Field(
        default=50,
        ge=1,
        description=(
            "with `SESSION_IDLE_ACTION=snapshot`: snapshots the bot keeps in the project; "
            "past it the oldest is deleted, and its thread starts afresh (its files fetched "
            "again)"
        ),
    )
    session_retain_s: float = Field(
        default=86_400,
        gt=0,
        description=(
            "with `SESSION_IDLE_ACTION=stop`: how long a stopped sandbox is kept before it is "
            "deleted (the orphan sweeper spares it until then)"
        ),
    )
    sandbox_network: bool = Field(
        default=False,
        description=(
            "`on` lets model-written code reach the network in a Buddy sandbox; `off` runs it "
            "in a network namespace of its own (setup commands keep the network either way). "
            "The local backend never has a network"
        ),
    )
    repo_hosts: str = Field(
        default="",
        description="comma-separated hosts `/analyze` may fetch from (empty: any public host)",
    )
    repo_allowed_addresses: str = Field(
        default="",
        description=(
            "comma-separated addresses or networks (`10.1.2.3`, `10.0.0.0/8`, `::1`) a "
            "repository host may be or resolve to although they are not public: a git server on "
            "your own network"
        ),
        json_schema_extra={"shown": "empty: public addresses only"},
    )
    repo_allowed_ports: str = Field(
        default="443,80",
        description="comma-separated ports a repository URL may name",
    )
    repo_max_bytes: int = Field(
        default=1 << 30,
        gt=0,
        description=(
            "the most a local checkout may take (`.git` included); the fetch is stopped past "
            "it, and never takes more than `SANDBOX_DISK_BYTES`, whose quota the checkout "
            "counts against"
        ),
    )

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
