"""The model: which one, where, its retries, and how a run and a long thread use it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr

DEFAULT_MODEL = "claude-sonnet-5-5"


class ModelSettings(BaseModel):
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        description="API key (not needed with `ANTHROPIC_BASE_URL` pointing at a local server)",
        json_schema_extra={"shown": "required"},
    )
    anthropic_base_url: str | None = Field(
        default=None,
        description="Messages API root",
        json_schema_extra={"shown": "the SDK's default"},
    )
    anthropic_model: str = Field(
        default=DEFAULT_MODEL,
        description="model id",
    )
    anthropic_max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="the SDK's retries of one request",
    )
    max_output_tokens: int = Field(
        default=16_000,
        ge=256,
        le=128_000,
        description=(
            "output limit per model turn (thinking included); above the model's own cap, the "
            "cap is sent instead (logged once). The cap and the context window are read once "
            "per process, at the first run, from the Models API (`GET /v1/models/{id}`: "
            "`max_input_tokens`, `max_tokens`); a server without that route (a local "
            "Messages-API server) or one that does not answer falls back to the published "
            "figures in `bot/agent/model_limits.py`, and a model missing there to 200,000 / 64,000 "
            "(logged)"
        ),
    )
    prompt_caching: bool = Field(
        default=True,
        description=(
            "mark the system prompt, tools and conversation for prompt caching "
            "(`cache_control`), so a thread's later turns read them from the cache at a tenth "
            "of the price"
        ),
    )
    context_editing: Literal["auto", "server", "client", "off"] = Field(
        default="auto",
        description=(
            "how a long thread stays within the model's window (see [Long "
            "threads](agent.md#long-threads)): `auto` (the Messages API's context-management "
            "betas where the endpoint has them, the bot's own clearing and summaries "
            "otherwise), `server`, `client` (the bot's own only), `off` (the history is sent "
            "whole, as before)"
        ),
    )
    context_clear_tokens: int | None = Field(
        default=None,
        ge=1_000,
        description=(
            "prompt sizes past which old tool results are cleared, and the conversation is "
            "summarised; unset: half the window (at most 100,000), and 1.5 times that (at most "
            "80% of the window)"
        ),
    )
    context_compact_tokens: int | None = Field(
        default=None,
        ge=1_000,
        description=(
            "prompt sizes past which old tool results are cleared, and the conversation is "
            "summarised; unset: half the window (at most 100,000), and 1.5 times that (at most "
            "80% of the window)"
        ),
    )
    context_keep_tool_uses: int = Field(
        default=3,
        ge=0,
        le=100,
        description="the latest tool results never cleared",
    )
    model_retry_attempts: int = Field(
        default=4,
        ge=1,
        le=10,
        description=(
            "retries of a whole turn (errors inside a stream, dropped connections, exhausted "
            "SDK retries) and their first backoff; an answer asking for a wait of more than 20 "
            "s ends the run with when to try again"
        ),
    )
    model_retry_delay_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "retries of a whole turn (errors inside a stream, dropped connections, exhausted "
            "SDK retries) and their first backoff; an answer asking for a wait of more than 20 "
            "s ends the run with when to try again"
        ),
    )
    max_turns: int = Field(
        default=15,
        ge=1,
        le=200,
        description="model turns per question",
    )
    tool_timeout_s: int = Field(
        default=120,
        ge=1,
        le=3600,
        description=(
            "longest a `run_code` call may run (the default per call is the smaller of 60 s and "
            "this), and the longest a `check_command` may wait"
        ),
    )
    command_wait_s: int = Field(
        default=30,
        ge=1,
        le=3600,
        description=(
            "the first wait of `check_command` on a background job; each further wait on it "
            "doubles, up to `TOOL_TIMEOUT_S`"
        ),
    )
    tool_output_chars: int = Field(
        default=8_000,
        ge=500,
        le=200_000,
        description="tool output kept for the model per call (head and tail)",
    )
