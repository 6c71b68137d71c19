"""One request's context edits: from the messages as sent to the prompt the model reads.

Order: the edits are checked (``context``), compaction blocks sent back are checked
and the history is read from the last one (``compaction``), then each
``clear_tool_uses_20250919`` edit runs on that (``clearing``). Compaction itself
comes last, on the edited prompt, once the fake knows the request will reach the model.
``clear_thinking_20251015`` is accepted and changes nothing here: the fake's model reads the
thinking of earlier turns as absent anyway (``history``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fakes.anthropic.blocks import Block
from tests.fakes.anthropic.cache import total_input_tokens
from tests.fakes.anthropic.clearing import clear_tool_uses
from tests.fakes.anthropic.compaction import (
    DEFAULT_TRIGGER,
    CompactionFn,
    Compactor,
    digest,
    has_compaction,
    read_from_compaction,
)
from tests.fakes.anthropic.context import (
    CLEAR,
    COMPACT,
    COMPACT_BETA,
    MODES,
    Edit,
    betas,
    check_context,
)
from tests.fakes.anthropic.validation import InvalidRequest

Messages = list[dict[str, Any]]


@dataclass
class Edited:
    view: Messages | None = None  # the messages the model reads; None: as sent
    applied: list[Edit] | None = None  # `applied_edits`; None: no `context_management` answer
    compact: Edit | None = None  # the compact edit asked for, if any

    def body(self, body: dict[str, Any]) -> dict[str, Any]:
        return body if self.view is None else {**body, "messages": self.view}


class ContextEditor:
    """``mode``: "apply" (the betas are supported), "refuse" (a server without them: the field
    is an extra input) or "ignore" (a compatible server that drops the field)."""

    def __init__(self, mode: str, secret: bytes, compaction_fn: CompactionFn = digest) -> None:
        if mode not in MODES:
            raise ValueError(f"context_editing must be one of {MODES}, not {mode!r}")
        self.mode = mode
        self.compactor = Compactor(secret, compaction_fn)

    def edit(self, body: dict[str, Any], headers: dict[str, str]) -> Edited:
        """Raises the 400 the server would answer."""
        edits = check_context(body, headers, self.mode)
        sent: Messages = body["messages"]
        view = self._from_compaction(sent, headers)
        if edits is None:
            return Edited(view)
        current = view if view is not None else sent
        applied: list[Edit] = []
        for edit in edits:
            if edit["type"] == CLEAR:
                current, entry = clear_tool_uses({**body, "messages": current}, edit)
                applied += [entry] if entry else []
        compact = next((e for e in edits if e["type"] == COMPACT), None)
        return Edited(None if current is sent else current, applied, compact)

    def compaction(self, edit: Edit | None, body: dict[str, Any]) -> tuple[Block, int] | None:
        """A compaction block, and the prompt size it summarised, when ``body`` (the prompt
        the model would read) passes the compact edit's trigger."""
        if edit is None:
            return None
        trigger = (edit.get("trigger") or {}).get("value", DEFAULT_TRIGGER)
        size = total_input_tokens(body)
        if size <= trigger:
            return None
        return self.compactor.block(body["messages"]), size

    def _from_compaction(self, messages: Messages, headers: dict[str, str]) -> Messages | None:
        if not has_compaction(messages):
            return None
        if self.mode != "apply":  # a server without compaction does not know the block
            raise InvalidRequest("messages: unknown content block type 'compaction'")
        if COMPACT_BETA not in betas(headers):
            raise InvalidRequest(
                f"messages: `compaction` blocks require the beta header "
                f"'anthropic-beta: {COMPACT_BETA}'"
            )
        self.compactor.check(messages)
        return read_from_compaction(messages)
