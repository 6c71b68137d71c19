"""One tokenizer for numbers as people and programs print them, shared by the answer and the
step outputs: "1,402,617,695", "1402617695", "1.402618e+09", "-3.2 million", "$1.4B",
"4.7%", "−0.5" (U+2212), "12 345" with thin or no-break spaces.

A number glued to a letter, digit or point before it, or to an underscore or hyphen after a
letter ("x1", "col_2", "COVID-19", the "3" of "1.2.3"), is part of a name and yields no
token; "_12.5_" is emphasis. A sign counts only where it cannot be a hyphen or dash between
two words or numbers ("2000-2020" is two numbers, no negative)."""

from __future__ import annotations

import re
from typing import NamedTuple

_SCALES = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "million": 1e6,
    "b": 1e9,
    "bn": 1e9,
    "billion": 1e9,
    "tn": 1e12,
    "trillion": 1e12,
}

_NUMBER = re.compile(
    r"""
    (?:(?<![^\W_])(?<![)\].])(?<![^\W_]_)(?P<sign>[-+\u2212]))?
    (?:(?P<cur>[$€£])(?P<sign2>[-+\u2212])?)?     # "$-3.2" as well as "-$3.2"
    (?<![^\W_])(?<!\.)(?<![^\W_]_)(?<![^\W\d_]-)  # no name ("col_2", "COVID-19"), "_1_" is
    (?P<int>\d{1,3}(?:[,\u00a0\u2009\u202f]\d{3}(?!\d))+|\d+)
    (?:\.(?P<frac>\d+))?
    (?:[eE](?P<exp>[-+]?\d+))?
    (?:
        (?P<pct>\ ?%|\ ?(?i:percent|per\ cent|pct|pp|percentage\ points?)\b)
      | (?P<abbr>[kKMBm]|bn|mn|tn)(?![A-Za-z])
      | \ ?(?P<abbr2>bn|mn|mln|tn)\b
      | [\ \u00a0](?P<word>(?i:thousand|million|billion|trillion))\b
    )?
    """,
    re.VERBOSE,
)
_NON_DIGIT = re.compile(r"\D")


class Token(NamedTuple):
    """A number found in text: its digits as written and what they mean. (A named tuple: an
    output of 100 k characters makes tens of thousands of them.)"""

    start: int
    end: int
    number: float  # as written before any scale word, signed: 3.2 for "-3.2 million" is -3.2
    scale: float  # 1e6 for "million", 1 when none
    decimals: int  # digits after the point, less the exponent ("1.5e3" has -2)
    percent: bool
    signed: bool  # written with "-", "−" or "+"
    currency: bool
    grouped: bool  # written with thousands separators
    digits: str  # the integer digits without separators

    @property
    def value(self) -> float:
        return self.number * self.scale


def tokens(text: str) -> list[Token]:
    """Every number in `text`, in order, in one pass."""
    return [_token(match) for match in _NUMBER.finditer(text)]


def _token(match: re.Match[str]) -> Token:
    sign, cur, sign2, written, frac, exp, pct, abbr, abbr2, word = match.groups()
    sign = sign or sign2
    digits = written if written.isdigit() else _NON_DIGIT.sub("", written)
    power = int(exp) if exp else 0
    number = float(f"{digits}.{frac or 0}e{power}") if frac or power else float(digits)
    if sign and sign != "+":
        number = -number
    scale_word = abbr or abbr2 or word
    start, end = match.span()
    scale = 1.0
    if scale_word == "m" and not cur:
        # A bare "m" is more often metres or minutes than millions; "$3.2m" is millions.
        end -= 1
    elif scale_word:
        scale = _SCALES[scale_word.lower()]
    decimals = (len(frac) if frac else 0) - power
    grouped = len(digits) != len(written)
    return Token(
        start, end, number, scale, decimals, bool(pct), bool(sign), bool(cur), grouped, digits
    )
