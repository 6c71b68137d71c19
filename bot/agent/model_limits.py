"""The model's limits: its context window and its `max_tokens` cap.

Read once per process from the Models API (`GET /v1/models/{id}`: `max_input_tokens`,
`max_tokens`); a server without that route (a local Messages-API server, an older proxy)
falls back to the published figures below, and a model missing from them to a conservative
default, so a run never sends more than the model takes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Literal

import anthropic
import httpx2

log = logging.getLogger(__name__)

LimitsSource = Literal["api", "table", "default"]


@dataclass(frozen=True)
class Limits:
    context_window: int  # the most prompt tokens the model reads
    max_output: int  # the most `max_tokens` it accepts
    source: LimitsSource = "table"


_SMALL = Limits(200_000, 64_000)
_LARGE = Limits(1_000_000, 128_000)
# The published figures (context / max output), November 2026; by exact model id.
TABLE: dict[str, Limits] = {
    **dict.fromkeys(
        (
            "claude-fable-5-2", "claude-fable-5-1", "claude-fable-5",
            "claude-mythos-5-2", "claude-mythos-5-1", "claude-mythos-5",
            "claude-opus-5-5", "claude-opus-5", "claude-opus-4-8", "claude-opus-4-7",
            "claude-opus-4-6", "claude-sonnet-5-5", "claude-sonnet-5", "claude-haiku-5-5",
        ),
        _LARGE,
    ),
    "claude-sonnet-4-6": Limits(1_000_000, 64_000),
    **dict.fromkeys(
        (
            "claude-opus-4-5", "claude-opus-4-5-20251101", "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929", "claude-haiku-4-5", "claude-haiku-4-5-20251001",
        ),
        _SMALL,
    ),
}  # fmt: skip
# A model nobody listed: the smallest figures of any current model, so nothing is refused.
DEFAULT = Limits(200_000, 64_000, "default")
LOOKUP_TIMEOUT_S = 10.0


def table_limits(model: str) -> Limits:
    """The published figures for `model`, or DEFAULT."""
    return TABLE.get(model, DEFAULT)


async def fetch_limits(client: anthropic.AsyncAnthropic, model: str) -> Limits:
    """The model's limits from the Models API, else from the table."""
    quick = client.with_options(max_retries=0, timeout=LOOKUP_TIMEOUT_S)
    try:
        info = await quick.models.retrieve(model)
    except (anthropic.APIError, httpx2.HTTPError, ValueError) as exc:
        # 404 from a server without the route, connection refused, a body that is not JSON.
        log.info("model limits: the Models API did not answer for %s (%s)", model, exc)
        info = None
    fallback = table_limits(model)
    if info is not None and info.max_input_tokens and info.max_tokens:
        return Limits(info.max_input_tokens, info.max_tokens, "api")
    if fallback.source == "default":
        log.warning(
            "model limits: %s is unknown; assuming %d context and %d output tokens",
            model, fallback.context_window, fallback.max_output,
        )  # fmt: skip
    return fallback


class ModelLimits:
    """The configured model's limits, looked up on first use and kept for the process."""

    def __init__(self, client: anthropic.AsyncAnthropic, model: str) -> None:
        self._client = client
        self._model = model
        self._limits: Limits | None = None
        self._lock = asyncio.Lock()
        self._capped_logged = False

    async def get(self) -> Limits:
        async with self._lock:  # racing first runs make one request
            if self._limits is None:
                self._limits = await fetch_limits(self._client, self._model)
                log.info("model limits for %s: %s", self._model, self._limits)
            return self._limits

    async def max_tokens(self, wanted: int) -> int:
        """`wanted` (MAX_OUTPUT_TOKENS), or the model's cap when that is lower."""
        cap = (await self.get()).max_output
        if wanted > cap and not self._capped_logged:
            self._capped_logged = True
            log.warning(
                "MAX_OUTPUT_TOKENS=%d is above %s's cap; sending max_tokens=%d",
                wanted, self._model, cap,
            )  # fmt: skip
        return min(wanted, cap)
