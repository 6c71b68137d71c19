"""Cost in USD from the price table in `prices.toml` (data, not code: prices change often)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from bot.usage import Usage


@dataclass(frozen=True)
class Rates:
    input: float
    write_5m: float
    write_1h: float
    read: float
    output: float

    def cost(self, usage: Usage) -> float:
        return (
            self.input * usage.input_tokens
            + self.write_5m * usage.cache_write_5m_tokens
            + self.write_1h * usage.cache_write_1h_tokens
            + self.read * usage.cache_read_tokens
            + self.output * usage.output_tokens
        ) / 1e6


@dataclass(frozen=True)
class ModelPrice:
    base: Rates
    above_tokens: int | None = None
    above: Rates | None = None

    def cost(self, usage: Usage) -> float:
        """Price one response; a long-prompt band applies to the whole request."""
        long_prompt = self.above_tokens is not None and usage.prompt_tokens > self.above_tokens
        return (self.above if long_prompt and self.above else self.base).cost(usage)


def _rates(row: dict[str, Any]) -> Rates:
    return Rates(**{k: float(row[k]) for k in ("input", "write_5m", "write_1h", "read", "output")})


@cache
def price_table() -> dict[str, ModelPrice]:
    raw = tomllib.loads(resources.files("bot.agent").joinpath("prices.toml").read_text())
    table = {
        model: ModelPrice(
            base=_rates(row),
            above_tokens=row.get("above_tokens"),
            above=_rates(row["above"]) if "above" in row else None,
        )
        for model, row in raw["models"].items()
    }
    table.update({alias: table[target] for alias, target in raw.get("aliases", {}).items()})
    return table


def response_cost(model: str, usage: Usage) -> float | None:
    """Cost of one response, or None for a model the table does not know (never a silent $0)."""
    price = price_table().get(model)
    return price.cost(usage) if price else None
