"""The tool-use loop, written by hand on `AsyncAnthropic` (full history every turn).

Turn after turn: send the history, hear the reply, run its tool calls (`tool_calls`), and
end when the model answers or a limit is reached (`endings`). The context keeper
(`keeper`) keeps a long conversation within the model's window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import Message

from bot.agent import endings, tool_calls
from bot.agent.blocks import MODEL_KEY, dump, for_api, texts
from bot.agent.checking import Checked, check, correction
from bot.agent.context import ContextEditing
from bot.agent.endings import FULL_STOPS, FULL_WINDOW_NOTE, LAST_TURN_NOTE, TERMINAL_STOPS
from bot.agent.keeper import GO_ON_NOTE, ContextKeeper, Rewrite
from bot.agent.model_client import ModelError, PromptTooLong, RetryPolicy, create_message
from bot.agent.model_limits import ModelLimits
from bot.agent.prompt import system_blocks
from bot.agent.tools import Toolbox
from bot.agent.totals import RunTotals
from bot.agent.trim import drop_thinking
from bot.memory.notes import cited
from bot.run_events import AgentView, RunFailed, RunFinished, TextEmitted


@dataclass(frozen=True)
class AgentConfig:
    model: str
    max_turns: int = 15
    max_output_tokens: int = 16_000
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    prompt_caching: bool = True
    instructions: str = ""  # the operator's, for every run (OPERATOR_INSTRUCTIONS_FILE)


# Called with the history after every change, and with what a rewrite of it replaced.
Checkpoint = Callable[[list[dict[str, Any]], dict[str, Any] | None], Awaitable[None]]


class Agent:
    """One conversation: its history survives across `run` calls (follow-up questions).

    `history` continues a saved conversation; `checkpoint` is called with the history after
    every change, so a restart can pick it up. `limits` caps `max_tokens` at the model's and
    gives each turn's event the context window. `context` keeps a long conversation within
    the window (None: the history is sent whole, as it is)."""

    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        config: AgentConfig,
        toolbox: Toolbox,
        *,
        history: list[dict[str, Any]] | None = None,
        checkpoint: Checkpoint | None = None,
        limits: ModelLimits | None = None,
        context: ContextEditing | None = None,
    ) -> None:
        self._client = client
        self._keeper = (
            ContextKeeper(client, config.model, config.retry, limits, context) if context else None
        )
        self._limits = limits  # None: MAX_OUTPUT_TOKENS is sent as it is
        self._config = config
        self._toolbox = toolbox
        self._tools = toolbox.definitions()
        self._checkpoint = checkpoint
        self._question = ""
        self._context = ""  # the run's system prompt tail: files, channel notes
        self._run_calls: list[str] = []  # this run's steps, in order: what the thread numbers
        # A run cut off by a crash may have left tool calls unanswered; they get results
        # saying so, or the API would refuse the history.
        self.history: list[dict[str, Any]] = list(history or [])
        if unanswered := tool_calls.interrupted(self.history[-1] if self.history else None):
            self._add_user(unanswered)
        self._unbind_thinking()

    def _unbind_thinking(self) -> None:
        """Thinking is bound to the model that wrote it: after a change of model, turns of the
        old one are sent without theirs (the API refuses them otherwise). A turn saved before
        turns were marked with their model is left as it is."""
        for message in self.history:
            model = message.get(MODEL_KEY)
            if message["role"] != "assistant" or model in (None, self._config.model):
                continue
            drop_thinking(message)

    async def run(
        self,
        question: str,
        context: str,
        view: AgentView,
        budget_usd: float | None = None,
        *,
        notes: Sequence[str] = (),
    ) -> RunFinished | RunFailed:
        """Answer `question`; `context` describes the session's files (system prompt tail).
        With `budget_usd`, the run stops cleanly once its model turns have cost that much.
        `notes` tell of what happened since the last question; they go before it, in the
        conversation, since the history is resent as is and stays in the prompt cache."""
        run = RunTotals(budget_usd=budget_usd)
        self._question, self._run_calls, self._context = question, [], context
        if self._keeper is not None and (
            rewrite := await self._keeper.before_question(self.history)
        ):
            await self._apply(rewrite, run, view)
        self._add_user([{"type": "text", "text": t} for t in (*notes, question)])
        await self._save()
        try:
            return await self._loop(run, context, view)
        except ModelError as exc:
            failed = RunFailed(str(exc), run.turns, run.usage, run.cost, cause="model")
            await view(failed)
            return failed

    async def _loop(self, run: RunTotals, context: str, view: AgentView) -> RunFinished | RunFailed:
        system = system_blocks(
            context, cache=self._config.prompt_caching, instructions=self._config.instructions
        )
        max_tokens, window = await self._limit_values()
        compacted = False  # a prompt too long is compacted once, then the run ends
        corrected = False  # untraced figures go back to the model once
        while True:
            params = await self._params(system, max_tokens)
            try:
                message = await self._request(params, run, view)
            except PromptTooLong:
                if compacted or not await self._compact_now(run, view):
                    raise ModelError(FULL_WINDOW_NOTE) from None
                compacted = True
                continue
            await view(run.add(message, window))
            stop = message.stop_reason or "end_turn"
            if stop == "refusal":  # a refused turn is dropped, never run: the thread goes on
                await view(failed := endings.refusal(run, message))
                return failed
            if stop in FULL_STOPS and not compacted and await self._compact_now(run, view):
                compacted = True  # the cut turn is dropped; it goes on from the summary
                continue
            self._add("assistant", dump(message.content))
            self.history[-1][MODEL_KEY] = self._config.model
            await self._save()
            calls = [b for b in message.content if b.type == "tool_use"]
            if stop == "pause_turn":
                # The server paused its own loop; sending the turn back resumes it. A pause is a
                # turn like any other, so the limits end a run that keeps pausing.
                if limit := await self._limit_reached(run, message, view, []):
                    return limit
                continue
            if stop in ("tool_use", "max_tokens") and calls:
                for text in texts(message):
                    await view(TextEmitted(text))
                if limit := await self._limit_reached(run, message, view, calls):
                    return limit
                last_next = run.turns >= self._config.max_turns - 1
                await self._run_tools(calls, view, stop == "max_tokens", last_next)
                continue
            # A turn cut short (a full context window, say) may still hold calls: they are
            # answered unrun, or the history is refused at the next question.
            await self._answer_unrun(calls, endings.ENDED_UNRUN)
            checked = await self._check(message)
            room = endings.has_room(run, self._config.max_turns)
            if stop in TERMINAL_STOPS and checked.missing and not corrected and room:
                corrected = True
                await self._correct(checked, run)
                continue
            return await self._finish(run, message, view, stop, checked)

    async def _limit_reached(
        self, run: RunTotals, message: Message, view: AgentView, calls: list[Any]
    ) -> RunFinished | None:
        """The run's end if its turn limit or budget is reached; unrun calls are answered."""
        if (limit := endings.limit_reached(run, self._config.max_turns)) is None:
            return None
        stop, note = limit
        await self._answer_unrun(calls, note)
        return await self._finish(run, message, view, stop)

    async def _check(self, message: Message) -> Checked:
        """The answer's figures traced to the steps' outputs (the limits' notes left out)."""
        answer, _ = self._answer(message)
        return await check(answer, self._question, self.history, self._run_calls, endings.OWN_NOTES)

    async def _correct(self, checked: Checked, run: RunTotals) -> None:
        """The untraced figures back to the model, before any answer is shown."""
        blocks = [{"type": "text", "text": correction(checked)}]
        if run.turns >= self._config.max_turns - 1:
            blocks.append({"type": "text", "text": LAST_TURN_NOTE})
        self._add_user(blocks)
        await self._save()

    async def _limit_values(self) -> tuple[int, int | None]:
        """The `max_tokens` to send and the context window (None when not known)."""
        wanted = self._config.max_output_tokens
        if self._limits is None:
            return wanted, None
        return await self._limits.max_tokens(wanted), (await self._limits.get()).context_window

    async def _request(self, params: dict[str, Any], run: RunTotals, view: AgentView) -> Any:
        """One model turn; an endpoint that refuses the context-management betas gets the
        request again without them (the bot edits from then on)."""
        try:
            message = await create_message(self._client, params, self._config.retry)
        except ModelError as exc:
            if self._keeper is None or not self._keeper.editing.refused(_cause(exc)):
                raise
            params = {k: v for k, v in params.items() if k not in ("betas", "context_management")}
            message = await create_message(self._client, params, self._config.retry)
        if self._keeper is not None:
            for event in self._keeper.heard(params, message, run):
                await view(event)
        return message

    async def _compact_now(self, run: RunTotals, view: AgentView) -> bool:
        """Compaction in the middle of a run, after the prompt was refused as too long."""
        if (
            self._keeper is None
            or (rewrite := await self._keeper.compact_if_possible(self.history)) is None
        ):
            return False
        await self._apply(rewrite, run, view)
        self._add_user([{"type": "text", "text": GO_ON_NOTE}])
        await self._save()
        return True

    async def _apply(self, rewrite: Rewrite, run: RunTotals, view: AgentView) -> None:
        if rewrite.summary_call is not None:
            call = rewrite.summary_call
            await view(run.add_compaction(call.model, call.usage))
        self.history = rewrite.history
        await self._save(rewrite.archive)
        await view(rewrite.event)

    async def _params(self, system: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self._config.model,
            "max_tokens": max_tokens,
            "system": system,
            "tools": self._tools,
            "messages": [for_api(m) for m in self.history],
        }
        if self._config.prompt_caching:
            # Automatic caching: the breakpoint follows the newest block, so each turn reads
            # the whole previous conversation from the cache.
            params["cache_control"] = {"type": "ephemeral"}
        if self._keeper is not None:
            params.update(await self._keeper.request())
        return params

    async def _run_tools(
        self, calls: list[Any], view: AgentView, truncated: bool, last_next: bool
    ) -> None:
        """Run the turn's calls and answer every id, even when cancelled."""
        results: list[dict[str, Any]] = []
        try:
            await tool_calls.run_calls(
                calls, self._toolbox, view, self._run_calls, results, truncated=truncated
            )
        finally:
            results += tool_calls.cancelled(calls, results)
            if last_next:
                results.append({"type": "text", "text": LAST_TURN_NOTE})
            self._add_user(results)
            await asyncio.shield(self._save())

    async def _answer_unrun(self, calls: list[Any], note: str) -> None:
        """Calls the run ends without running are answered, and saved: a saved history
        with a call unanswered would be refused at the next question."""
        if calls:
            self._add_user(tool_calls.unrun(calls, note))
            await self._save()

    async def _finish(
        self,
        run: RunTotals,
        message: Message,
        view: AgentView,
        stop: str,
        checked: Checked | None = None,
    ) -> RunFinished:
        checked = checked or await self._check(message)  # before the notes below, own figures
        text, notes_used = self._answer(message)
        answer = endings.closing(text, stop, run)
        finished = RunFinished(
            answer or "(no answer text)", run.turns, run.usage, run.cost, stop, run.budget_usd,
            checked.traces, checked.note, notes_used,
        )  # fmt: skip
        await view(finished)
        return finished

    def _answer(self, message: Message) -> tuple[str, int]:
        """The answer's text, and how many channel notes it says shaped it (that line off)."""
        return cited("\n\n".join(texts(message)).strip(), self._context)

    async def _save(self, archive: dict[str, Any] | None = None) -> None:
        if self._checkpoint is not None:
            await self._checkpoint(self.history, archive)

    def _add_user(self, blocks: list[dict[str, Any]]) -> None:
        self._add("user", blocks)

    def _add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        """Append content, merging into a trailing message of the same role (roles alternate;
        a turn resumed after `pause_turn` continues the same assistant message)."""
        if self.history and self.history[-1]["role"] == role:
            self.history[-1]["content"].extend(blocks)
        else:
            self.history.append({"role": role, "content": list(blocks)})


def _cause(exc: Exception) -> Exception:
    """The API error behind `exc` (the SDK's, when the bot wrapped it), else `exc`."""
    return exc.__cause__ if isinstance(exc.__cause__, Exception) else exc
