"""Which of Slack's data surfaces each workspace takes, learnt from its refusals.

Slack rolls new blocks out in phases, and a client or workspace without one answers
`invalid_blocks`. A table goes as a `data_table` block, else as a `table` block, else as
monospace text; a chart as a `data_visualization` block, else as its image alone. What a
workspace refused is kept for the life of the process and logged once.

A refusal pointing inside a block (a rule of that block broken, not the block unknown) is
about that one message: it falls back too, but nothing is learnt for the workspace.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

TABLE_KINDS = ("data_table", "table", "monospace")  # the order tables fall back in
CHART = "data_visualization"
POINTER = re.compile(r"\[json-pointer:/blocks/(\d+)(/[^\]]*)?\]")


@dataclass
class Shape:
    """How one message shows its data: the table kind, and whether charts are blocks."""

    table_kind: str = TABLE_KINDS[0]
    charts: bool = True

    def fall_back(self, failed: str) -> bool:
        """The next shape after `failed` (a block type) was refused; False: none left."""
        if failed == CHART and self.charts:
            self.charts = False
            return True
        if failed in TABLE_KINDS[:-1] and self.table_kind == failed:
            self.table_kind = TABLE_KINDS[TABLE_KINDS.index(failed) + 1]
            return True
        return False


@dataclass
class Surfaces:
    _teams: dict[str, Shape] = field(default_factory=dict)

    def shape(self, team: str) -> Shape:
        """A fresh shape for a message in `team`'s workspace, as far as it is known."""
        known = self._teams.get(team, Shape())
        return Shape(known.table_kind, known.charts)

    def refused(
        self, team: str, shape: Shape, blocks: list[dict[str, Any]], messages: Iterable[str]
    ) -> bool:
        """Slack refused `blocks` (invalid_blocks, its `messages`): move `shape` on to its
        next fallback and learn it for the team when the block itself was refused.
        False when there is nothing left to fall back to."""
        failed, whole = _blamed(blocks, list(messages), shape)
        if failed is None or not shape.fall_back(failed):
            return False
        if whole:
            self._learn(team, shape, failed, messages)
        else:
            log.info("Slack refused a %s block here (%s); this message falls back", failed,
                     "; ".join(messages))  # fmt: skip
        return True

    def _learn(self, team: str, shape: Shape, failed: str, messages: Iterable[str]) -> None:
        known = self._teams.setdefault(team, Shape())
        was = (known.table_kind, known.charts)
        if failed == CHART:
            known.charts = False
        else:
            known.table_kind = shape.table_kind
        if (known.table_kind, known.charts) != was:
            instead = "images only" if failed == CHART else f"{known.table_kind} blocks"
            log.warning(
                "Workspace %s refused %s blocks (%s); it gets %s from now on",
                team, failed, "; ".join(messages) or "invalid_blocks", instead,
            )  # fmt: skip


def _blamed(
    blocks: list[dict[str, Any]], messages: list[str], shape: Shape
) -> tuple[str | None, bool]:
    """(the block type Slack blamed, whether it blamed the block as a whole). Without a
    pointer to one of ours, charts are blamed first, then the table."""
    for message in messages:
        match = POINTER.search(message)
        if match and int(match.group(1)) < len(blocks):
            kind = str(blocks[int(match.group(1))].get("type"))
            if kind in (CHART, *TABLE_KINDS[:-1]):
                return kind, match.group(2) in (None, "", "/type")
    types = {str(b.get("type")) for b in blocks}
    if shape.charts and CHART in types:
        return CHART, True
    if shape.table_kind in types:
        return shape.table_kind, True
    return None, False
