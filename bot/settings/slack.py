"""The Slack app: its tokens, who may use it, and how it shows a run."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator


class SlackSettings(BaseModel):
    slack_bot_token: SecretStr | None = Field(
        default=None,
        description="for the Slack app",
    )
    slack_app_token: SecretStr | None = Field(
        default=None,
        description="for the Slack app",
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/",
        description="for the Slack app",
    )
    slack_cdn_origins: str = Field(
        default="",
        description=(
            "comma-separated origins (`http://127.0.0.2:8002`) besides Slack's own that a file "
            "download may be redirected to, without the token: a test stand-in for Slack's CDN. "
            "Leave it empty in production"
        ),
    )
    slack_ui: Literal["assistant", "classic"] = Field(
        default="assistant",
        description=(
            "`assistant`: the thread's status line, one streamed message per run (a task per "
            "step, then the answer) and feedback buttons; a workspace that refuses streaming "
            "gets `classic`. `classic`: a status message, one message per step, then the "
            "answer. `agent`, its earlier name, is read as `assistant`"
        ),
    )
    allowed_channels: str = Field(
        default="",
        description="comma-separated Slack ids that may use the bot (empty: all)",
    )
    allowed_users: str = Field(
        default="",
        description="comma-separated Slack ids that may use the bot (empty: all)",
    )
    allow_dms: bool = Field(
        default=True,
        description="answer direct messages",
    )
    stop_by_anyone: bool = Field(
        default=False,
        description=(
            "anyone allowed to use the bot may press a run's Stop; false: only the person who asked"
        ),
    )
    slack_rate_scale: float = Field(
        default=1.0,
        gt=0,
        description=(
            "the bot paces its calls to 90% of Slack's rate tiers (Tier 2: 20 a minute, Tier 3: "
            "50, Tier 4: 100, posts: 1 a second per channel); this multiplies them, for a "
            "workspace with other limits or a test server"
        ),
    )

    @field_validator("slack_ui", mode="before")
    @classmethod
    def _earlier_ui_name(cls, value: object) -> object:
        """`agent` was the assistant style's name before "agent" came to mean the model loop."""
        return "assistant" if value == "agent" else value
