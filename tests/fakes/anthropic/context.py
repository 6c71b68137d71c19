"""Server-side context management (doc 6): the betas it needs and the shape of each edit.

``context_management: {"edits": [...]}`` is a beta field. A server without the beta refuses
it as an extra input; a compatible server may ignore it; the API applies it when the request
names the edit's beta in ``anthropic-beta``. Option shapes follow the SDK's TypedDicts
(``BetaClearToolUses20250919EditParam``, ``BetaCompact20260112EditParam``, ...): any other
key is refused, as the API's validation refuses extra inputs. The wordings are ours; the doc
gives none.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.anthropic.validation import InvalidRequest

CONTEXT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
MODES = ("apply", "refuse", "ignore")
CLEAR = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
EDIT_BETAS = {CLEAR: CONTEXT_BETA, CLEAR_THINKING: CONTEXT_BETA, COMPACT: COMPACT_BETA}
EDIT_KEYS = {
    CLEAR: {"type", "trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs"},
    CLEAR_THINKING: {"type", "keep"},
    COMPACT: {"type", "trigger", "instructions", "pause_after_compaction"},
}
MIN_COMPACT_TRIGGER = 50_000  # doc 6: "default 150,000, minimum 50,000"

Edit = dict[str, Any]


def betas(headers: dict[str, str]) -> set[str]:
    """The betas ``anthropic-beta`` names (the SDK joins them with commas)."""
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


def check_context(body: dict[str, Any], headers: dict[str, str], mode: str) -> list[Edit] | None:
    """The edits to apply, in order; None when the request asks for none or the server
    ignores the field. Raises the 400 the server would answer."""
    if "context_management" not in body or mode == "ignore":
        return None
    if mode == "refuse":  # a server without the beta: an unknown top-level field
        raise InvalidRequest("context_management: Extra inputs are not permitted")
    config = body["context_management"]
    if not isinstance(config, dict):
        raise InvalidRequest("context_management: Input should be a valid dictionary")
    _no_extra("context_management", config, {"edits"})
    edits = config.get("edits", [])
    if not isinstance(edits, list):
        raise InvalidRequest("context_management.edits: Input should be a valid list")
    kinds: list[str] = []
    for i, edit in enumerate(edits):
        kinds.append(_check_edit(f"context_management.edits.{i}", edit, betas(headers)))
    if len(set(kinds)) != len(kinds):
        raise InvalidRequest("context_management.edits: each edit type may appear only once")
    return edits


def _check_edit(where: str, edit: Any, named: set[str]) -> str:
    kind = edit.get("type") if isinstance(edit, dict) else None
    if kind not in EDIT_BETAS:
        raise InvalidRequest(
            f"{where}.type: Input tag {kind!r} does not match any of the expected tags: "
            + ", ".join(repr(k) for k in EDIT_BETAS)
        )
    if EDIT_BETAS[kind] not in named:
        raise InvalidRequest(
            f"{where}: {kind} requires the beta header 'anthropic-beta: {EDIT_BETAS[kind]}'"
        )
    _no_extra(where, edit, EDIT_KEYS[kind])
    if kind == CLEAR:
        _check_clear(where, edit)
    elif kind == COMPACT:
        _check_compact(where, edit)
    return str(kind)


def _check_clear(where: str, edit: Edit) -> None:
    if "trigger" in edit:
        _typed(f"{where}.trigger", edit["trigger"], ("input_tokens", "tool_uses"), 1)
    if "keep" in edit:
        _typed(f"{where}.keep", edit["keep"], ("tool_uses",), 0)
    if edit.get("clear_at_least") is not None:
        _typed(f"{where}.clear_at_least", edit["clear_at_least"], ("input_tokens",), 1)
    if edit.get("exclude_tools") is not None:
        _names(f"{where}.exclude_tools", edit["exclude_tools"])
    inputs = edit.get("clear_tool_inputs")
    if inputs is not None and not isinstance(inputs, bool):
        _names(f"{where}.clear_tool_inputs", inputs)


def _check_compact(where: str, edit: Edit) -> None:
    if edit.get("trigger") is not None:
        _typed(f"{where}.trigger", edit["trigger"], ("input_tokens",), MIN_COMPACT_TRIGGER)
    if edit.get("instructions") is not None and not isinstance(edit["instructions"], str):
        raise InvalidRequest(f"{where}.instructions: Input should be a valid string")
    if "pause_after_compaction" in edit and not isinstance(edit["pause_after_compaction"], bool):
        raise InvalidRequest(f"{where}.pause_after_compaction: Input should be a valid boolean")


def _typed(where: str, value: Any, kinds: tuple[str, ...], minimum: int) -> None:
    """``{"type": <one of kinds>, "value": <int >= minimum>}`` and nothing else."""
    if not isinstance(value, dict):
        raise InvalidRequest(f"{where}: Input should be a valid dictionary")
    if value.get("type") not in kinds:
        expected = " or ".join(repr(k) for k in kinds)
        raise InvalidRequest(f"{where}.type: Input should be {expected}")
    _no_extra(where, value, {"type", "value"})
    number = value.get("value")
    if not isinstance(number, int) or isinstance(number, bool):
        raise InvalidRequest(f"{where}.value: Input should be a valid integer")
    if number < minimum:
        raise InvalidRequest(f"{where}.value: Input should be greater than or equal to {minimum}")


def _names(where: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRequest(f"{where}: Input should be a valid list of strings")


def _no_extra(where: str, given: dict[str, Any], allowed: set[str]) -> None:
    for key in sorted(set(given) - allowed):
        raise InvalidRequest(f"{where}.{key}: Extra inputs are not permitted")
