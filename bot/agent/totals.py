"""Running totals of one `Agent.run`: turns, usage and cost against its budget."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from anthropic.types import Message

from bot.agent.pricing import response_cost
from bot.run_events import ModelTurn
from bot.usage import Usage


@dataclass
class RunTotals:
    """Running totals of one `Agent.run`."""

    started: float = field(default_factory=time.monotonic)
    budget_usd: float | None = None
    turns: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0

    def add(self, message: Message, window: int | None) -> ModelTurn:
        self.turns += 1
        return ModelTurn(self.turns, *self._spend(message.model, message.usage), window)

    def add_compaction(self, model: str, usage: Any) -> ModelTurn:
        """A summarising call or iteration: paid for, not a turn of the run."""
        return ModelTurn(self.turns, *self._spend(model, usage), purpose="compaction")

    def _spend(self, model: str, api_usage: Any) -> tuple[Usage, float | None]:
        usage = Usage.from_api(api_usage)
        self.usage += usage
        cost = response_cost(model, usage)
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        return usage, cost

    @property
    def over_budget(self) -> bool:
        spent = self.cost
        return self.budget_usd is not None and spent is not None and spent >= self.budget_usd
