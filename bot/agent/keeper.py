"""One conversation's context keeper: it sizes the prompt, asks the endpoint to edit it where
it can, and otherwise rewrites the saved history itself (between questions, or once when a
prompt is refused as too long)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import anthropic

from bot.agent import compact, trim
from bot.agent.context import ContextEditing, Thresholds
from bot.agent.events import ContextTrimmed
from bot.agent.model import RetryPolicy
from bot.agent.models import ModelLimits
from bot.agent.usage import Usage

DEFAULT_TOKENS_PER_CHAR = 1 / 3  # until a response says; JSON and code run near 3 chars a token
SUMMARY_SHARE = 0.6  # of the window, at most, for the transcript a summary is written from
FALLBACK_WINDOW = 200_000


@dataclass(frozen=True)
class Rewrite:
    """A new history, what it replaced (for the audit), and what to tell the views."""

    history: list[dict[str, Any]]
    archive: dict[str, Any]
    event: ContextTrimmed
    summary_call: Any = None  # the response of the bot's own summarising call


class ContextKeeper:
    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        model: str,
        retry: RetryPolicy,
        limits: ModelLimits | None,
        editing: ContextEditing,
    ) -> None:
        self._client, self._model, self._retry = client, model, retry
        self._limits, self.editing = limits, editing
        self._per_char = DEFAULT_TOKENS_PER_CHAR
        self.prompt_tokens: int | None = None  # the latest response's prompt size
        self._fixed_chars = 0  # the system prompt and tools, as the latest request sent them

    async def thresholds(self) -> Thresholds:
        return Thresholds.of(self.editing.config, await self._window())

    async def request(self) -> dict[str, Any]:
        """What to add to a request's parameters: the endpoint's own edits, when it has them."""
        return self.editing.request(await self.thresholds())

    def seen(self, params: dict[str, Any], message: Any) -> list[ContextTrimmed]:
        """Learn from a response: the prompt's size per character sent, and what the server
        edited (as events)."""
        self.prompt_tokens = Usage.from_api(message.usage).prompt_tokens
        self._fixed_chars = len(json.dumps([params["system"], params["tools"]]))
        if "context_management" not in params:
            sent = self._fixed_chars + trim.size(params["messages"])
            if self.prompt_tokens:
                self._per_char = self.prompt_tokens / sent
            return []
        self.editing.answered(message)
        return server_edits(message, self.prompt_tokens)

    def estimate(self, history: list[dict[str, Any]]) -> int:
        """The history's prompt tokens, scaled from the latest response. Under server edits
        the latest prompt is what the model saw (after clearing), so it is taken as is."""
        if self.editing.server and self.prompt_tokens is not None:
            return self.prompt_tokens
        return self._tokens(history)

    def _tokens(self, history: list[dict[str, Any]]) -> int:
        return int((trim.size(history) + self._fixed_chars) * self._per_char)

    async def between_questions(self, history: list[dict[str, Any]]) -> Rewrite | None:
        """Clear or compact before the next question, if the conversation has grown past the
        thresholds (the endpoint's own edits, when it has them, come first)."""
        t = await self.thresholds()
        if not history or not trim.rewritable(history):
            return None
        before = self.estimate(history)
        if self.editing.server:
            pruned = trim.prune_compacted(history)
            if pruned is not None:
                return _rewrite(pruned, history, "compacted", "server", before, before)
            if t.server_compacts or before <= t.compact:
                return None
            return await self.compact(history)
        if before > t.compact:
            return await self.compact(history)
        if before <= t.clear:
            return None
        return self._clear(history, t, before)

    async def compact(self, history: list[dict[str, Any]]) -> Rewrite:
        """The bot's own compaction: the whole history becomes a summary. Raises ModelError
        when the summarising call fails."""
        window = await self._window()
        budget = min(window * SUMMARY_SHARE, max((await self.thresholds()).compact, 1))
        cap = await self._limits.max_tokens(compact.SUMMARY_TOKENS) if self._limits else 4096
        summary, message = await compact.summarise(
            self._client,
            self._model,
            history,
            budget_chars=int(budget / self._per_char),
            max_tokens=cap,
            retry=self._retry,
        )
        new = compact.compacted(summary or "(The summary came back empty.)", history)
        before = self.estimate(history)
        after = self._tokens(new)
        self.prompt_tokens = None  # the next response measures the new prompt
        return _rewrite(new, history, "compacted", "bot", before, after, summary_call=message)

    def _clear(self, history: list[dict[str, Any]], t: Thresholds, before: int) -> Rewrite | None:
        # Down to three quarters of the threshold, and never less than `clear_at_least`: a
        # clearing rewrites the prompt cache from its first edit on.
        want = max(t.clear_at_least, before - (t.clear - t.clear_at_least))
        cleared, count = trim.clear_results(history, t.keep, int(want / self._per_char))
        after = self._tokens(cleared)
        if not count or before - after < t.clear_at_least:
            return None
        self.prompt_tokens = None
        return _rewrite(cleared, history, "cleared", "bot", before, after, items=count)

    async def _window(self) -> int:
        return (await self._limits.get()).context_window if self._limits else FALLBACK_WINDOW


def server_edits(message: Any, prompt_tokens: int) -> list[ContextTrimmed]:
    """The edits a response reports: cleared tool uses, and a compaction block."""
    events: list[ContextTrimmed] = []
    managed = getattr(message, "context_management", None)
    for edit in getattr(managed, "applied_edits", None) or []:
        cleared = getattr(edit, "cleared_input_tokens", 0) or 0
        uses = getattr(edit, "cleared_tool_uses", 0) or 0
        if edit.type == "clear_tool_uses_20250919" and uses:
            events.append(
                ContextTrimmed("cleared", "server", prompt_tokens + cleared, prompt_tokens, uses)
            )
    if any(b.type == "compaction" for b in message.content):
        events.append(ContextTrimmed("compacted", "server", prompt_tokens, prompt_tokens))
    return events


def _rewrite(
    new: list[dict[str, Any]],
    old: list[dict[str, Any]],
    kind: str,
    by: str,
    before: int,
    after: int,
    *,
    items: int = 0,
    summary_call: Any = None,
) -> Rewrite:
    replaced = trim.changed(new, old) if kind == "cleared" else old
    archive = {"at": time.time(), "reason": f"{kind} by {by}", "messages": replaced}
    event = ContextTrimmed(kind, by, before, after, items)  # type: ignore[arg-type]
    return Rewrite(new, archive, event, summary_call)
