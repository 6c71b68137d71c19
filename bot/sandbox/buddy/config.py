"""The Buddy backend's settings: token, workspace, project, API address and sandbox shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.errors import ConfigError, SandboxConfigError
from bot.sandbox.buddy.retries import REQUEST_TIMEOUT_S
from bot.sandbox.limits import KERNEL_GRACE_S, Limits

if TYPE_CHECKING:
    from bot.settings import Settings

# A kernel cell's frames move to a new sync exec this often: with the wait for a new kernel
# (kernel.START_WAIT_S) and the reader's margin (scripts.READER_EXTRA_S), an exec stays
# within the 60 s after which Buddy fails it.
CELL_HAND_OFF_S = 35.0

REGION_URLS = {
    "US": "https://api.buddy.works",
    "EU": "https://api.eu.buddy.works",
    "AS": "https://api.asia.buddy.works",
    "AP": "https://api.asia.buddy.works",  # the Asia region's code in older SDKs
}


def api_url_for(api_url: str | None, region: str) -> str:
    """BUDDY_API_URL if set, else the region's URL (US, EU, AS; AP is an alias of AS)."""
    if api_url:
        return api_url.rstrip("/")
    try:
        return REGION_URLS[region.upper()]
    except KeyError:
        raise SandboxConfigError(
            f"Configuration error: BUDDY_REGION {region!r} is not one of US, EU, AS. "
            "Set BUDDY_REGION, or BUDDY_API_URL for a self-hosted Buddy."
        ) from None


@dataclass(frozen=True)
class BuddyConfig:
    token: str = field(repr=False)
    workspace: str
    project: str | None
    api_url: str
    resources: str = "1x2"
    timeout_s: int = 900  # Buddy's inactivity auto-stop
    snapshot_id: str | None = None
    setup_command: str | None = None
    ready_timeout_s: float = 300
    retry_base_delay_s: float = 1.0
    poll_interval_s: float = 0.1
    request_timeout_s: float = REQUEST_TIMEOUT_S  # see retries.request_timeouts
    python_kernel: bool = True  # False: Python runs as a process per call
    network: bool = False  # model-written code may reach the network (SANDBOX_NETWORK=on)
    kernel_grace_s: float = KERNEL_GRACE_S  # an interrupted cell's time to return
    output_bytes: int = Limits().output_bytes  # per stream kept (SANDBOX_OUTPUT_BYTES)
    command_max_s: float = Limits().command_max_s  # a detached command's wall-clock cap
    cell_hand_off_s: float = CELL_HAND_OFF_S  # a kernel cell's frames move to a new exec

    @classmethod
    def from_settings(cls, settings: Settings) -> BuddyConfig:
        """The Buddy part of the settings; a missing one is a one-line ConfigError."""
        token = settings.buddy_token.get_secret_value().strip() if settings.buddy_token else ""
        if not token:
            raise ConfigError(
                _missing(
                    "BUDDY_TOKEN",
                    "a personal access token with the scopes WORKSPACE, SANDBOX_READ and "
                    "SANDBOX_WRITE",
                )
            )
        if not settings.buddy_workspace:
            raise ConfigError(
                _missing("BUDDY_WORKSPACE", "the part after app.buddy.works/ in its address")
            )
        if not settings.buddy_project:
            raise ConfigError(
                _missing(
                    "BUDDY_PROJECT",
                    "the project the sandboxes live in; outside a project needs admin rights",
                )
            )
        return cls(
            token=token,
            workspace=settings.buddy_workspace,
            project=settings.buddy_project,
            api_url=api_url_for(settings.buddy_api_url, settings.buddy_region),
            resources=settings.buddy_resources,
            timeout_s=settings.buddy_sandbox_timeout,
            snapshot_id=settings.buddy_snapshot or None,
            setup_command=settings.sandbox_setup_command or None,
            ready_timeout_s=settings.buddy_ready_timeout_s,
            retry_base_delay_s=settings.buddy_retry_delay_s,
            network=settings.sandbox_network,
            output_bytes=settings.sandbox_output_bytes,
            command_max_s=settings.sandbox_command_max_s,
        )


def _missing(name: str, what: str) -> str:
    return (
        f"Configuration error: {name} is not set. "
        f"Set {name} ({what}) in the environment or in .env."
    )
