"""A firing's figures against the last firing's: the figure index that provenance keeps for
each answer (its figures, in the order the answer gives them) read position by position, so
"412 → 437 (+6.1%)" names the same figure of the same analysis run again."""

from __future__ import annotations

import re
from collections.abc import Sequence

SHOWN = 3  # changes named in one note
NUMBER = re.compile(r"^[-−]?\d[\d,]*(\.\d+)?%?$")


def changes(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """The figures that moved, as "old → new (±x.x%)", in answer order (at most SHOWN)."""
    moved = []
    for old, new in zip(before, after, strict=False):
        a, b = _value(old), _value(new)
        if a is None or b is None or old.endswith("%") != new.endswith("%") or a == b:
            continue
        moved.append(f"{old} → {new}" + (f" ({_percent(a, b)})" if a else ""))
    return moved[:SHOWN]


def note(before: Sequence[str], after: Sequence[str], since: str) -> str:
    """A line for the thread: what changed since the last firing (`since`, its day)."""
    moved = changes(before, after)
    if moved:
        return f"Since the last firing ({since}): " + "; ".join(moved) + "."
    if before and after:
        return f"The figures are as they were at the last firing ({since})."
    return ""


def _value(text: str) -> float | None:
    text = text.strip()
    if not NUMBER.match(text):
        return None
    return float(text.replace(",", "").replace("%", "").replace("−", "-"))


def _percent(old: float, new: float) -> str:
    change = (new - old) / abs(old) * 100
    return f"{'+' if change >= 0 else '−'}{abs(change):.1f}%"
