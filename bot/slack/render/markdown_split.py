"""Cutting a long Markdown answer into pieces that each fit one Slack message, so that every
piece still reads well: cuts fall between paragraphs where they can, a table cut in two
repeats its header row in the next piece, and a code block cut in two is closed and opened
again."""

from __future__ import annotations

import re

PIECE_MAX = 11_000  # Slack holds 12,000 characters of markdown per message; keep room
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")  # the |---|---| line under a table's header


def split(text: str, first_max: int = PIECE_MAX, most: int = PIECE_MAX) -> list[str]:
    """`text` in pieces: the first at most `first_max` characters (it may be "" when even
    the first paragraph does not fit), the others at most `most`."""
    pieces: list[str] = []
    current = ""
    for block in _blocks(text, most):
        limit = first_max if not pieces else most
        if len(current) + 2 + len(block) > limit and (current or not pieces):
            pieces.append(current)
            current = block
        else:
            current = f"{current}\n\n{block}" if current else block
    return [*pieces, current]


def _blocks(text: str, most: int) -> list[str]:
    """Paragraphs (a fenced code block counts as one), each cut to at most `most`."""
    blocks: list[str] = []
    for paragraph in _paragraphs(text):
        blocks += [paragraph] if len(paragraph) <= most else _cut(paragraph, most)
    return blocks


def _paragraphs(text: str) -> list[str]:
    paragraphs: list[str] = []
    current: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.strip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                paragraphs.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs or [""]


def _cut(paragraph: str, most: int) -> list[str]:
    """A long paragraph cut at line ends; tables and code blocks stay whole in each piece."""
    lines = paragraph.split("\n")
    head, tail = _frame(lines)
    budget = most - len(tail) - sum(len(line) + 1 for line in head)
    pieces, current = [], list(head)
    for line in lines[len(head) :]:
        for part in [line[i : i + budget] for i in range(0, max(len(line), 1), budget)]:
            size = sum(len(x) + 1 for x in current) + len(part)
            if len(current) > len(head) and size > most - len(tail):
                pieces.append("\n".join(current) + tail)
                current = list(head)
            current.append(part)
    pieces.append("\n".join(current))
    return pieces


def _frame(lines: list[str]) -> tuple[list[str], str]:
    """What each piece of a cut paragraph repeats at its top, and what closes it."""
    if len(lines) > 1 and lines[0].lstrip().startswith("|") and TABLE_RULE.match(lines[1]):
        return lines[:2], ""
    if lines[0].strip().startswith("```"):
        return lines[:1], "\n```"
    return [], ""
