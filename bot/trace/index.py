"""The numbers of one step's output, sorted by value, so that finding whether any of them
falls in a range costs a binary search rather than a scan of the output."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from bot.trace.numbers import Token, tokens

LINE_CLIP = 200
_DIGITS = re.compile(r"\d+")


class OutputIndex:
    """Every value one output printed, with where it printed it."""

    def __init__(self, output: str) -> None:
        self.output = output
        pairs = sorted(_values(output, tokens(output)))
        self._values = [value for value, _ in pairs]
        self._positions = [position for _, position in pairs]

    def first(self, ranges: Iterable[tuple[float, float]]) -> int | None:
        """The earliest position of a value inside any of the closed `ranges`."""
        best = None
        for low, high in ranges:
            i, j = bisect_left(self._values, low), bisect_right(self._values, high)
            if i < j:
                found = min(self._positions[i:j])
                best = found if best is None else min(best, found)
        return best

    def line(self, position: int) -> str:
        """The output line that holds `position`, stripped; a line longer than LINE_CLIP is
        cut to the stretch around `position` (a JSON list may be one line of 100 k)."""
        start = self.output.rfind("\n", 0, position) + 1
        end = self.output.find("\n", position)
        raw = self.output[start : end if end >= 0 else len(self.output)]
        text = raw.strip()
        if len(text) <= LINE_CLIP:
            return text
        at = position - start - (len(raw) - len(raw.lstrip()))
        first = min(max(0, at - LINE_CLIP // 2), len(text) - LINE_CLIP)
        window = text[first : first + LINE_CLIP]
        if first > 0:
            window = "…" + window[1:]
        if first + LINE_CLIP < len(text):
            window = window[:-1] + "…"
        return window


def _values(output: str, found: list[Token]) -> Iterable[tuple[float, int]]:
    for token in found:
        # "3.2 billion" is 3.2e9 only: a figure of "3.2 million" must not find its 3.2.
        yield token.value, token.start
        if token.grouped and _listed(output, token):
            # "[100,200,300]" is a list, not 100200300: index both readings.
            head = output[token.start : token.end].split(".")[0]
            for part in _DIGITS.findall(head):
                yield float(part), token.start


def _listed(output: str, token: Token) -> bool:
    before = output[token.start - 1 : token.start]
    after = output[token.end : token.end + 1]
    return before in ("[", "(", ",") or after in ("]", ")", ",")
