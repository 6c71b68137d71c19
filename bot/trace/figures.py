"""Ties each figure of a Markdown answer to the first step output that printed it, so that
an answer can be checked for figures no step produced before it is posted.

What counts as a figure: integers, decimals and percentages, with thousands separators
(",", thin and no-break spaces), signs ("-", "−", "+"), currency ("$", "€", "£") and scale
words ("k", "M", "bn", "B", "million", "billion", "thousand"; a bare "m" is not millions,
"$3.2m" is), in prose, tables, bold and code spans alike. Not counted (bot.trace.noise):
years, dates, times, versions, links, emoji codes, step numbers, list and footnote markers,
ranks ("top 10") and a table's Rank column, ordinals, names with digits ("x1", "COVID-19"),
integers below 10, fenced code in a language, and any figure whose value is that of one of
the question's figures (read by the same rules, so the question's years and small counts
exclude nothing). In a range the first number takes the unit of the second ("10–20%",
"30 to 40 million"). An accounting negative "(3.2)" is read as the plain number 3.2.

How a figure matches an output number: the output number, rounded to the figure's shown
precision, equals it (a tie matches either way). "3.2 million" matches 3,214,567, and 3.2
printed without a scale word (an output already in millions); "4.7%" matches 4.72 and the
fraction 0.0472; an integer ending in three or more zeros is read as rounded at its last
nonzero digit, keeping two significant digits ("1,400,000,000" matches 1,402,617,695). An
output less precise than the figure does not match it ("1.402618e+09" is not
"1,402,617,695"). A figure written with a sign must match an output number of that sign;
one written without a sign matches either ("a decrease of 3.2" matches -3.2). Only outputs
are searched, not the code a step ran."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bot.trace import noise
from bot.trace.index import OutputIndex
from bot.trace.numbers import Token, tokens
from bot.trace.wording import and_list, steps_text

NOT_FOUND_LISTED = 3
_RANGE = re.compile(r"\s*(?:–|—|-|to)\s*")


@dataclass(frozen=True)
class Figure:
    """A figure as the answer wrote it."""

    text: str  # as written, e.g. "1,402,617,695", "4.7%", "-3.2 million"
    value: float  # 4.7 for "4.7%", -3.2e6 for "-3.2 million"
    decimals: int  # digits after the point as written; negative for rounded integers
    percent: bool
    start: int
    end: int


@dataclass(frozen=True)
class Source:
    """One step: its number (1-based, in its run's call order) and output. `earlier` says
    how many questions back its run was (0: this run's own step); `call_id` names the call."""

    step: int
    output: str
    code: str = ""
    earlier: int = 0
    call_id: str = ""


@dataclass(frozen=True)
class Trace:
    """Where a figure came from: the step and output line, or step None when none; the
    step's `earlier` and `call_id` as its source gave them."""

    figure: Figure
    step: int | None
    line: str
    earlier: int = 0
    call_id: str = ""


def figures(answer: str, question: str = "") -> list[Figure]:
    """The figures of `answer` to check, in order."""
    return [figure for figure, _ in _read(answer, question)]


def trace(answer: str, sources: Sequence[Source], question: str = "") -> list[Trace]:
    """Each figure of `answer` with the earliest step whose output printed it: this run's
    steps first, then those of the questions before, the latest first."""
    read = _read(answer, question)
    if not read:
        return []
    indexes = _Indexes(sources)
    return [_trace_one(figure, token, indexes) for figure, token in read]


def summary(traces: Sequence[Trace]) -> str:
    """ "12 figures, all traced to steps 2–4", "11 of 12 figures traced; not found: 3.2
    million", or "" when there are no figures. Steps of earlier questions are said to be
    theirs: "3 figures, all traced to step 2 and to step 1 of the previous question"."""
    if not traces:
        return ""
    total = len(traces)
    noun = "figure" if total == 1 else "figures"
    steps = [item.step for item in traces if item.step is not None]
    if len(steps) == total:
        traced = "traced" if total == 1 else "all traced"
        return f"{total} {noun}, {traced} to {_where(traces)}"
    missing = list(dict.fromkeys(item.figure.text for item in traces if item.step is None))
    return (
        f"{len(steps)} of {total} {noun} traced; "
        f"not found: {and_list(missing, most=NOT_FOUND_LISTED)}"
    )


def _where(traces: Sequence[Trace]) -> str:
    """The steps the traces name, this run's first, then each earlier question's."""
    by_question: dict[int, list[int]] = {}
    for item in traces:
        if item.step is not None:
            by_question.setdefault(item.earlier, []).append(item.step)
    parts = []
    for earlier in sorted(by_question):
        steps = steps_text(by_question[earlier])
        if earlier == 0:
            parts.append(steps)
        elif earlier == 1:
            parts.append(f"{steps} of the previous question")
        else:
            parts.append(f"{steps} of the question {earlier} before this one")
    return " and to ".join(parts)


class _Indexes:
    """The outputs' indexes in step order, each built the first time a figure needs it (an
    answer whose figures all come from the first steps leaves the later outputs unread)."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self._sources = sorted(sources, key=lambda source: (source.earlier, source.step))
        self._built: list[OutputIndex] = []

    def __iter__(self) -> Iterator[tuple[Source, OutputIndex]]:
        for i, source in enumerate(self._sources):
            if i == len(self._built):
                self._built.append(OutputIndex(source.output))
            yield source, self._built[i]


def _trace_one(figure: Figure, token: Token, indexes: _Indexes) -> Trace:
    ranges = _ranges(token, figure.decimals)
    for source, index in indexes:
        position = index.first(ranges)
        if position is not None:
            line = index.line(position)
            return Trace(figure, source.step, line, source.earlier, source.call_id)
    return Trace(figure, None, "")


def _read(answer: str, question: str) -> list[tuple[Figure, Token]]:
    asked = _QuestionFigures(_candidates(question))
    read = []
    for token, text in _candidates(answer):
        figure = Figure(
            text=text,
            value=token.value,
            decimals=_shown_decimals(token),
            percent=token.percent,
            start=token.start,
            end=token.end,
        )
        if not asked.holds(figure):
            read.append((figure, token))
    return read


def _candidates(text: str) -> list[tuple[Token, str]]:
    """The tokens of `text` that are figures, with their text."""
    mask = noise.masked(text)
    found = tokens(text)
    kept = []
    for i, token in enumerate(found):
        if i + 1 < len(found):
            token = _ranged(token, found[i + 1], text)
        if not noise.is_noise(token, text, mask):
            kept.append((token, text[token.start : token.end]))
    return kept


def _ranged(token: Token, following: Token, text: str) -> Token:
    """The first number of a range takes the unit of the second: "10–20%", "30 to 40 million"."""
    plain = not token.percent and token.scale == 1
    if plain and _RANGE.fullmatch(text, token.end, following.start):
        return token._replace(percent=following.percent, scale=following.scale)
    return token


def _shown_decimals(token: Token) -> int:
    """The decimals as written, or for an integer ending in three or more zeros, minus the
    zeros that look like rounding (keeping at least two significant digits)."""
    if token.decimals != 0 or token.scale != 1 or token.percent:
        return token.decimals
    significant = token.digits.lstrip("0")
    zeros = len(significant) - len(significant.rstrip("0"))
    if zeros < 3:
        return 0
    return -min(zeros, len(significant) - 2)


def _ranges(token: Token, decimals: int) -> list[tuple[float, float]]:
    """The closed ranges of output values that round to the figure as shown."""
    half = 0.5 * 10.0 ** -max(-300, min(decimals, 300))  # "1e400" must not overflow
    number = abs(token.number)
    spans = [(number - half, number + half)]
    if token.scale != 1:
        spans = [(low * token.scale, high * token.scale) for low, high in spans] + spans
    if token.percent:
        spans.append(((number - half) / 100, (number + half) / 100))
    spans = [_widen(low, high) for low, high in spans]
    if not token.signed:
        return spans + [(-high, -low) for low, high in spans]
    if token.number < 0:
        return [(-high, -low) for low, high in spans]
    return spans


def _widen(low: float, high: float) -> tuple[float, float]:
    # Binary floats: 4.7 + 0.05 may land a hair inside an edge the decimal rounding includes.
    slack = 1e-12 * max(abs(low), abs(high))
    return low - slack, high + slack


class _QuestionFigures:
    """The values of the question's figures, read by the same rules (so a figure written as
    in the question has its value too)."""

    def __init__(self, found: list[tuple[Token, str]]) -> None:
        self._values = {_key(token.value) for token, _ in found}

    def holds(self, figure: Figure) -> bool:
        return _key(figure.value) in self._values


def _key(value: float) -> float:
    # Values compared with a tolerance of about nine significant digits.
    return float(f"{abs(value):.9g}")
