"""Rules that depend on the model or span the whole request: unknown models, thinking modes,
forced tool choice, cache breakpoints and the request size. Each cites the section of the
Messages API reference (anthropic-messages-api.md) it follows."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from tests.fakes.anthropic.blocks import as_blocks
from tests.fakes.anthropic.models import ALWAYS_THINKING, NO_BUDGET_THINKING, max_output, thinks
from tests.fakes.anthropic.validation import InvalidRequest, NotFound, TooLarge

# 1.7: "Messages API about 32 MB per request". Read as 32,000,000 bytes, the smaller reading.
MAX_REQUEST_BYTES = 32_000_000
# 3: at most 4 breakpoints per request.
MAX_CACHE_BREAKPOINTS = 4


def check_max_tokens(body: dict[str, Any]) -> None:
    """4 and 6: `max_tokens` above the model's output cap is a 400 (the wording is the API's
    as widely reported; the doc gives none)."""
    model = str(body.get("model"))
    asked, cap = body.get("max_tokens"), max_output(model)
    if isinstance(asked, int) and asked > cap:
        raise InvalidRequest(
            f"max_tokens: {asked} > {cap}, which is the maximum allowed number of output "
            f"tokens for {model}"
        )


def check_window(prompt_tokens: int, window: int) -> None:
    """4 and 6: a prompt longer than the context window is a 400. The doc gives no wording;
    this is the one the API is widely reported to use. Tokens are the fake's estimate, the
    same that ``usage`` reports (input plus cache reads and writes)."""
    if prompt_tokens > window:
        raise InvalidRequest(f"prompt is too long: {prompt_tokens} tokens > {window} maximum")


def check_size(size: int | None, limit: int) -> None:
    """``size`` None: too big for the server even to read."""
    if size is None or size > limit:
        raise TooLarge(f"Request exceeds the maximum allowed size of {limit:,} bytes")


def check_model(body: dict[str, Any], known: Collection[str]) -> None:
    """1.7: a wrong model id is a 404 `not_found_error`."""
    model = body.get("model")
    if model not in known:
        raise NotFound(f"model: {model}")


def check_model_rules(body: dict[str, Any]) -> None:
    model = str(body.get("model"))
    _check_thinking_mode(model, body.get("thinking"))
    _check_tool_choice(model, body)


def _check_thinking_mode(model: str, mode: Any) -> None:
    """1.2 `thinking`: `disabled` is refused where thinking is always on, and the legacy
    `enabled` form (a token budget) on Opus 4.7 and later, Sonnet 5 and later, and Fable."""
    kind = mode.get("type") if isinstance(mode, dict) else None
    if kind == "disabled" and model in ALWAYS_THINKING:
        raise InvalidRequest(f"thinking: thinking cannot be disabled on {model}")
    if kind == "enabled" and model in NO_BUDGET_THINKING:
        raise InvalidRequest(
            f"thinking: type 'enabled' is not supported on {model}; use {{'type': 'adaptive'}}"
        )


def _check_tool_choice(model: str, body: dict[str, Any]) -> None:
    """0.3 and 1.3: forced tool choice (`any`, `tool`) is refused with thinking on, which on
    Opus 5.5, Sonnet 5.5 and Fable 5.1/5.2 is always."""
    choice = body.get("tool_choice")
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind in ("any", "tool") and thinks(model, body):
        raise InvalidRequest(
            f"tool_choice: Thinking may not be enabled when tool_choice forces tool use "
            f"(type '{kind}'); thinking is on for {model}. Use 'auto' or 'none'."
        )


def check_cache_markers(body: dict[str, Any]) -> None:
    """3 "Breakpoints": at most four, and 1h breakpoints must come before 5m ones, in prompt
    order (tools, system, messages; the top-level marker lands on the last block)."""
    ttls = [_ttl(b["cache_control"]) for b in _prompt_blocks(body) if b.get("cache_control")]
    if isinstance(body.get("cache_control"), dict):
        ttls.append(_ttl(body["cache_control"]))
    if len(ttls) > MAX_CACHE_BREAKPOINTS:
        raise InvalidRequest(
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(ttls)}."
        )
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        raise InvalidRequest(
            "cache_control: a breakpoint with ttl='1h' must not come after one with "
            "ttl='5m'; longer TTLs must come first (tools, then system, then messages)"
        )


def _ttl(marker: Any) -> str:
    ttl = marker.get("ttl", "5m") if isinstance(marker, dict) else "5m"
    if ttl not in ("5m", "1h"):
        raise InvalidRequest(f"cache_control.ttl: Input should be '5m' or '1h', not {ttl!r}")
    return str(ttl)


def _prompt_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = [*(body.get("tools") or []), *as_blocks(body.get("system", []))]
    for message in body["messages"]:
        blocks.extend(as_blocks(message["content"]))
    return [b for b in blocks if isinstance(b, dict)]
