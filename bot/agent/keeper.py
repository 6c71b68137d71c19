"""One conversation's context keeper: it sizes the prompt, asks the endpoint to edit it where
it can, and otherwise rewrites the saved history itself (between questions, or once when a
prompt is refused as too long)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anthropic

from bot.agent import compact, trim
from bot.agent.blocks import compaction_iterations
from bot.agent.context import ContextEditing, Thresholds
from bot.agent.model_client import ModelError, RetryPolicy
from bot.agent.model_limits import ModelLimits
from bot.agent.totals import RunTotals
from bot.run_events import ContextTrimmed, Event
from bot.usage import Usage

log = logging.getLogger(__name__)

DEFAULT_TOKENS_PER_CHAR = 1 / 3  # until a response says; JSON and code run near 3 chars a token
SUMMARY_SHARE = 0.6  # of the window, at most, for the transcript a summary is written from
FALLBACK_WINDOW = 200_000
GO_ON_NOTE = (
    "The conversation was summarised above to fit the model's context. Go on with the latest "
    "question; the steps you already took for it are in the summary."
)


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
        self._fixed_chars = 0  # the system prompt and tools, as the latest request sent them

    async def thresholds(self) -> Thresholds:
        return Thresholds.of(self.editing.config, await self._window())

    async def request(self) -> dict[str, Any]:
        """What to add to a request's parameters: the endpoint's own edits, when it has them."""
        return self.editing.request(await self.thresholds())

    def seen(self, params: dict[str, Any], message: Any) -> list[ContextTrimmed]:
        """Learn from a response: the prompt's size per character sent (when the server
        read the history as sent), and what the server edited (as events)."""
        prompt = Usage.from_api(message.usage).prompt_tokens
        self._fixed_chars = len(json.dumps([params["system"], params["tools"]]))
        edits: list[ContextTrimmed] = []
        if "betas" in params:
            self.editing.answered(message)
            edits = server_edits(message, prompt)
        if prompt and not edits and not trim.has_compaction(params["messages"]):
            self._per_char = prompt / (self._fixed_chars + trim.size(params["messages"]))
        return edits

    def heard(self, params: dict[str, Any], message: Any, run: RunTotals) -> list[Event]:
        """What a response tells the run: the server's compaction calls (their cost) and
        its edits of the prompt."""
        events: list[Event] = [
            run.add_compaction(message.model, iteration)
            for iteration in compaction_iterations(message)
        ]
        return events + list(self.seen(params, message))

    async def before_question(self, history: list[dict[str, Any]]) -> Rewrite | None:
        """`between_questions`, where a failed summary leaves the history as it was: the
        question may still fit."""
        try:
            return await self.between_questions(history)
        except ModelError:
            log.warning("The conversation could not be summarised; it is sent as it is.")
            return None

    async def compact_if_possible(self, history: list[dict[str, Any]]) -> Rewrite | None:
        """`compact` in the middle of a run (a prompt refused as too long); None when the
        summary failed."""
        try:
            return await self.compact(history)
        except ModelError:
            return None

    def estimate(self, history: list[dict[str, Any]]) -> int:
        """The history's prompt tokens, scaled from the latest response."""
        return int((trim.size(history) + self._fixed_chars) * self._per_char)

    async def between_questions(self, history: list[dict[str, Any]]) -> Rewrite | None:
        """Clear, then compact if that is not enough, before the next question, once the
        conversation has grown past the thresholds. The bot clears even where the API could:
        the API clears on every request past its trigger, so the cleared point moves each
        turn and the prompt cache is rewritten each turn; the bot's clearing moves it once
        per `clear_at_least` (docs/performance.md). Compaction is the API's where it can."""
        t = await self.thresholds()
        if not history or not trim.rewritable(history):
            return None
        before = self.estimate(history)
        if self.editing.server and (pruned := trim.prune_compacted(history)) is not None:
            return _rewrite(pruned, history, "compacted", "server", before, self.estimate(pruned))
        cleared = self._clear(history, t, before) if before > t.clear else None
        after = cleared.event.after_tokens if cleared else before
        if after > t.compact and not (self.editing.server and t.server_compacts):
            return await self.compact(history)
        return cleared

    async def compact(self, history: list[dict[str, Any]]) -> Rewrite:
        """The bot's own compaction: the whole history becomes a summary. Raises ModelError
        when the summarising call fails."""
        window = await self._window()
        budget = min(window * SUMMARY_SHARE, Thresholds.of(self.editing.config, window).compact)
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
        after = self.estimate(new)
        return _rewrite(new, history, "compacted", "bot", before, after, summary_call=message)

    def _clear(self, history: list[dict[str, Any]], t: Thresholds, before: int) -> Rewrite | None:
        # Down to `clear - clear_at_least`, and never less than `clear_at_least`: a clearing
        # rewrites the prompt cache from its first edit on, so it should not come often.
        want = max(t.clear_at_least, before - (t.clear - t.clear_at_least))
        cleared, count = trim.clear_results(history, t.keep, int(want / self._per_char))
        after = self.estimate(cleared)
        if not count or before - after < t.clear_at_least:
            return None
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
    # `kind` is one of ContextTrimmed's kinds: the callers pass literals, typed here as str
    event = ContextTrimmed(kind, by, before, after, items)  # type: ignore[arg-type]
    return Rewrite(new, archive, event, summary_call)
