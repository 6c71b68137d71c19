"""Labels of rows that stand for a group or a total rather than one entity.

World Bank style files mix countries with regions, income groups and lending groups; sales
exports end with Total rows. Summing such a column with its detail rows counts twice."""

from __future__ import annotations

import re

_AND = r"(?:&|and)"
_GROUPS = [
    r"world|total|grand total|sub-?total|totals?\b.*|.*\btotal|sum|all|overall|average",
    r"all (?:countries|regions|economies|items|products|categories|others)",
    # income and lending groups
    rf"(?:high|low|middle|lower middle|upper middle|low {_AND} middle) income(?:\b.*)?",
    r"ida (?:total|only|blend)|ibrd only|ida & ibrd total|ida and ibrd total",
    r"oecd members|euro area|european union|arab world|small states|other small states",
    r"(?:pacific island|caribbean) small states|central europe and the baltics",
    r"fragile and conflict affected situations|heavily indebted poor countries.*",
    r"least developed countries.*|(?:early|late|pre|post)-demographic dividend",
    # regions, with the World Bank's suffixes such as (excluding high income)
    rf"(?:east asia {_AND} pacific|europe {_AND} central asia|latin america {_AND}"
    rf" (?:the )?caribbean|middle east(?:,| {_AND}) north africa.*|south asia|north america"
    r"|sub-saharan africa|africa (?:eastern and southern|western and central))(?:\b.*)?",
    r"(?:europe|asia|africa|americas|oceania|emea|apac|latam)(?: total)?",
    r"not classified",
]
_AGGREGATE = re.compile("|".join(f"(?:{g})" for g in _GROUPS), re.IGNORECASE)


def is_aggregate(label: str) -> bool:
    """True for labels such as World, Total, High income, Sub-Saharan Africa, Euro area."""
    return len(label) < 80 and _AGGREGATE.fullmatch(label.strip()) is not None


_HEADLINES = [  # the best-known kinds of aggregate, shown first
    re.compile(p, re.I)
    for p in (r"world|grand total|total|all|sum|overall", r".* total|total .*", r"\w+ income")
]


def examples(labels: list[str], n: int = 6) -> list[str]:
    """A few labels of different kinds, the best-known first: World, a total, an income
    group, a region; then more of each."""
    ranked = sorted(labels, key=_rank)
    firsts = [x for i, x in enumerate(ranked) if i == 0 or _rank(x) != _rank(ranked[i - 1])]
    return (firsts + [x for x in ranked if x not in firsts])[:n]


def _rank(label: str) -> int:
    return next((i for i, p in enumerate(_HEADLINES) if p.fullmatch(label)), len(_HEADLINES))
