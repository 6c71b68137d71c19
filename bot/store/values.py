"""Checks and clean-ups of values that every store backend applies the same way."""

from __future__ import annotations

from typing import Any

from bot.store.base import (
    SCHEDULE_STATES,
    SCHEDULE_UPDATABLE,
    SESSION_STATES,
    SESSION_UPDATABLE,
)


def check(value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {allowed}")


def text(s: str) -> str:
    """The text with lone surrogates replaced: SQLite stores UTF-8, which cannot hold them, and
    every backend stores free text the same way."""
    return s.encode("utf-8", "replace").decode("utf-8")


def check_update(fields: dict[str, Any]) -> None:
    """The fields `update_session` was given: only SESSION_UPDATABLE, and a known state."""
    if unknown := set(fields) - SESSION_UPDATABLE:
        raise TypeError(f"update_session cannot change {sorted(unknown)}")
    if "state" in fields:
        check(fields["state"], SESSION_STATES)


def check_schedule_update(fields: dict[str, Any]) -> None:
    """The fields `update_schedule` was given: only SCHEDULE_UPDATABLE, and a known state."""
    if unknown := set(fields) - SCHEDULE_UPDATABLE:
        raise TypeError(f"update_schedule cannot change {sorted(unknown)}")
    if "state" in fields:
        check(fields["state"], SCHEDULE_STATES)


PROMPT_KINDS = (
    "input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "cache_read_tokens",
)


def prompt_tokens(usage: dict[str, int]) -> int:
    """A turn's whole prompt from its usage (`Usage.to_dict`): input, cache writes and reads."""
    return sum(int(usage.get(kind, 0)) for kind in PROMPT_KINDS)
