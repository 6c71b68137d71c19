"""The models the fake knows, and the per-model rules the reference doc lists.

Reference: the Messages API reference, anthropic-messages-api.md (sections cited per constant).
"""

from __future__ import annotations

from typing import Any

# Section 4: the SDK 2.14 `Model` literal, less `claude-mythos-preview` (end of life
# 2026-06-30, before the doc was compiled). Anything else gets a 404 `not_found_error`.
KNOWN_MODELS: tuple[str, ...] = (
    "claude-fable-5-2",
    "claude-mythos-5-2",
    "claude-haiku-5-5",
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-sonnet-5",
    "claude-fable-5",
    "claude-mythos-5",
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-5",
    "claude-opus-4-5-20251101",
    "claude-sonnet-4-5",
    "claude-sonnet-4-5-20250929",
)

# Sections 0.3 and 1.3: thinking cannot be turned off, and forced tool choice is refused.
ALWAYS_THINKING = frozenset(
    {"claude-opus-5-5", "claude-sonnet-5-5", "claude-fable-5-1", "claude-fable-5-2"}
)

# Section 1.2 `thinking`: the legacy `enabled` form is refused on Opus 4.7 and later,
# Sonnet 5 and later, and Fable.
NO_BUDGET_THINKING = frozenset(
    {
        "claude-opus-4-7",
        "claude-opus-4-8",
        "claude-opus-5",
        "claude-opus-5-5",
        "claude-sonnet-5",
        "claude-sonnet-5-5",
        "claude-fable-5",
        "claude-fable-5-1",
        "claude-fable-5-2",
    }
)

# Sections 4 and 6: 200K context and 64K output on these; 1M and 128K on the rest, except
# Sonnet 4.6 (1M, but 64K output).
SMALL_CONTEXT = frozenset(
    {
        "claude-haiku-4-5",
        "claude-haiku-4-5-20251001",
        "claude-opus-4-5",
        "claude-opus-4-5-20251101",
        "claude-sonnet-4-5",
        "claude-sonnet-4-5-20250929",
    }
)


def thinks(model: str, body: dict[str, Any]) -> bool:
    """Whether the request runs with thinking on (always, on some models)."""
    mode = body.get("thinking")
    kind = mode.get("type") if isinstance(mode, dict) else None
    return model in ALWAYS_THINKING or kind in ("enabled", "adaptive")


def context_window(model: str) -> int:
    """Sections 4 and 6: the most prompt tokens the model reads."""
    return 200_000 if model in SMALL_CONTEXT else 1_000_000


def max_output(model: str) -> int:
    """Sections 4 and 6: the most `max_tokens` the model accepts."""
    small = model in SMALL_CONTEXT or model == "claude-sonnet-4-6"
    return 64_000 if small else 128_000


def model_info(model: str, window: int | None = None) -> dict[str, Any]:
    """``window``: a context window set for the fake instead of the model's own."""
    return {
        "type": "model",
        "id": model,
        "display_name": model.replace("-", " ").title(),
        "created_at": "2026-01-01T00:00:00Z",
        "lifecycle": "active",
        "max_input_tokens": window or context_window(model),
        "max_tokens": max_output(model),
    }
