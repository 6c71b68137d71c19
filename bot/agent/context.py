"""How a long conversation stays within the model's context window.

Past `clear` tokens, old tool results give way to placeholders; past `compact` tokens, the
conversation becomes a summary. The Messages API does both itself under its context-
management betas (doc 6); an endpoint without them (a local server, an older proxy) gets the
same from the bot (`trim`, `compact`). Which one an endpoint has is learnt once per process:
a 400 naming `context_management`, or an answer without it, means the bot does it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import anthropic

from bot.agent.compact import INSTRUCTIONS

log = logging.getLogger(__name__)

CLEAR_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
SERVER_COMPACT_MIN = 50_000  # doc 6: the smallest trigger server compaction takes
CLEAR_CAP = 100_000  # the API's own default trigger: past it, cost grows with no gain
Mode = Literal["auto", "server", "client"]


@dataclass(frozen=True)
class ContextConfig:
    """`mode`: server (the API's betas), client (the bot's own) or auto (server where the
    endpoint has it). Thresholds in prompt tokens; None: derived from the window."""

    mode: Mode = "auto"
    clear_tokens: int | None = None
    compact_tokens: int | None = None
    keep_tool_uses: int = 3


@dataclass(frozen=True)
class Thresholds:
    clear: int  # old tool results are cleared past this
    compact: int  # the conversation is summarised past this
    clear_at_least: int  # each clearing frees this much, so the cache is not rewritten often
    keep: int  # the latest tool results are never cleared

    @classmethod
    def of(cls, config: ContextConfig, window: int) -> Thresholds:
        """Defaults: clear at half the window (at most 100,000), compact at 1.5 times that
        (at most 80% of the window), clearing half of `clear` at a time."""
        clear = config.clear_tokens or min(window // 2, CLEAR_CAP)
        compact = config.compact_tokens or min(window * 4 // 5, clear * 3 // 2)
        compact = max(compact, clear)
        return cls(clear, compact, max(1, clear // 2), config.keep_tool_uses)

    @property
    def server_compacts(self) -> bool:
        return self.compact >= SERVER_COMPACT_MIN


class ContextEditing:
    """Whether the endpoint edits context itself; shared by a process's conversations."""

    def __init__(self, config: ContextConfig) -> None:
        self.config = config
        self._server = config.mode != "client"

    @property
    def server(self) -> bool:
        return self._server

    def request(self, t: Thresholds) -> dict[str, Any]:
        """Keyword arguments for `client.beta.messages` ({} when the bot edits). The
        API's clearing is the guard within a run (where the bot cannot rewrite the history:
        thinking is bound to it), so it fires only past `compact`; its compaction, where the
        window allows it, follows when clearing was not enough."""
        if not self._server:
            return {}
        edits: list[dict[str, Any]] = [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": t.compact},
                "keep": {"type": "tool_uses", "value": t.keep},
                "clear_at_least": {"type": "input_tokens", "value": t.clear_at_least},
            }
        ]
        betas = [CLEAR_BETA]
        if t.server_compacts:
            trigger = {"type": "input_tokens", "value": t.compact}
            edits.append(
                {"type": "compact_20260112", "trigger": trigger, "instructions": INSTRUCTIONS}
            )
            betas.append(COMPACT_BETA)
        return {"betas": betas, "context_management": {"edits": edits}}

    def refused(self, exc: Exception) -> bool:
        """True if `exc` is the endpoint refusing the betas: the bot edits from now on, and
        the request is sent again without them. Under mode server, it is the run's error."""
        if not self._server or self.config.mode == "server":
            return False
        if not isinstance(exc, anthropic.BadRequestError):
            return False
        text = str(getattr(exc, "message", "")) + str(exc.body)
        if "context_management" not in text and "anthropic-beta" not in text:
            return False
        self._to_client("refuses")
        return True

    def answered(self, message: Any) -> None:
        """An answer without `context_management` to a request with it: the endpoint ignored
        the edits, so the bot makes them from the next request on."""
        if self._server and self.config.mode == "auto" and message.context_management is None:
            self._to_client("ignores")

    def _to_client(self, why: str) -> None:
        self._server = False
        log.warning(
            "The model endpoint %s the context-management betas; the bot clears and compacts "
            "long conversations itself.",
            why,
        )
