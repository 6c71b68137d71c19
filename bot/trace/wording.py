"""Lists and step ranges in words: "steps 2–4", "steps 2, 4 and 7", "a, b, c and 2 more"."""

from __future__ import annotations

from collections.abc import Sequence


def and_list(items: Sequence[str], most: int | None = None) -> str:
    """ "a", "a and b", "a, b and c"; past `most` items, "a, b, c and 2 more"."""
    if most is not None and len(items) > most:
        return f"{', '.join(items[:most])} and {len(items) - most} more"
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def steps_text(steps: Sequence[int]) -> str:
    """The steps as a range when they run without a gap, else as a list."""
    ordered = sorted(set(steps))
    if len(ordered) == 1:
        return f"step {ordered[0]}"
    if ordered[-1] - ordered[0] == len(ordered) - 1:
        return f"steps {ordered[0]}–{ordered[-1]}"
    return f"steps {and_list([str(step) for step in ordered])}"
