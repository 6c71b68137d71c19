"""Benchmark: input tokens a run is billed for, with and without the bot's prompt caching
and tool-output truncation, and how the prompt grows over a long conversation.

Run from the repository root: `.venv/bin/python -m bench.tokens`.
Against the fake Messages API, whose usage figures follow the API's caching rules (tokens
estimated as characters / 4, a 1,024-token minimum cacheable prefix, 20-block lookback).
Costs use the price table's Sonnet 5.5 row: input $2, cache write $2.50, cache read $0.10
per million.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bench import sandbox_root
from bot.agent.pricing import price_table
from bot.run_events import Event, ModelTurn
from bot.usage import Usage
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.scripts import population_analyst
from tests.support import POPULATION_CSV, file_chunks, runtime_for

CONFIGS = {
    "caching + truncation (default)": {},
    "no caching": {"prompt_caching": False},
    "no truncation": {"tool_output_chars": 200_000},
    "neither": {"prompt_caching": False, "tool_output_chars": 200_000},
}
LONG_TURNS = 10
PRINT_CHARS = 30_000  # what each tool call of the long conversation prints


def long_talk(req: ModelRequest) -> Reply:
    """Ten tool calls in a row, each printing 30,000 characters, then an answer."""
    if req.turn < LONG_TURNS:
        code = f"print(('row {req.turn}: ' + 'x' * 90 + '\\n') * {PRINT_CHARS // 100})"
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    return Reply([text("done")])


async def run(script: Any, root: Path, csv: bool, **overrides: Any) -> list[Usage]:
    turns: list[Usage] = []

    async def record(event: Event) -> None:
        if isinstance(event, ModelTurn):
            turns.append(event.usage)

    async with FakeAnthropic(script, min_cache_tokens=1024) as fake:
        runtime = runtime_for(fake.base_url, root, max_turns=LONG_TURNS + 5, **overrides)
        session = runtime.sessions.new("bench-tokens")
        try:
            if csv:
                await session.add_file(POPULATION_CSV.name, lambda: file_chunks(POPULATION_CSV))
            await session.ask("Which three countries grew most from 2000 to 2020?", record)
        finally:
            await session.close()
            await runtime.close()
    return turns


def input_cost(usage: Usage) -> float:
    rates = price_table()["claude-sonnet-5-5"].base
    return (
        rates.input * usage.input_tokens
        + rates.write_5m * usage.cache_write_5m_tokens
        + rates.write_1h * usage.cache_write_1h_tokens
        + rates.read * usage.cache_read_tokens
    ) / 1e6


def total(turns: list[Usage]) -> Usage:
    out = Usage()
    for usage in turns:
        out += usage
    return out


async def main() -> None:
    with sandbox_root() as root:
        print("Population scenario (5 turns), input side per run:")
        print(f"  {'configuration':32} {'prompt tokens':>13} {'from cache':>10} {'input $':>9}")
        for name, overrides in CONFIGS.items():
            usage = total(await run(population_analyst, root, True, **overrides))
            share = usage.cache_read_tokens / usage.prompt_tokens
            print(
                f"  {name:32} {usage.prompt_tokens:>13,} {share:>10.0%} {input_cost(usage):>9.4f}"
            )
        print(
            f"\nLong conversation: {LONG_TURNS} tool calls each printing {PRINT_CHARS:,} characters"
        )
        for name in ("caching + truncation (default)", "no truncation"):
            turns = await run(long_talk, root, False, **CONFIGS[name])
            print(f"  {name}:")
            print(f"    {'turn':>4} {'prompt':>8} {'growth':>7} {'cached':>7} {'input $':>8}")
            previous = 0
            for i, usage in enumerate(turns, 1):
                share = usage.cache_read_tokens / usage.prompt_tokens
                growth = usage.prompt_tokens - previous
                previous = usage.prompt_tokens
                print(
                    f"    {i:>4} {usage.prompt_tokens:>8,} {growth:>7,} {share:>7.0%} "
                    f"{input_cost(usage):>8.4f}"
                )
            run_total = total(turns)
            print(
                f"    run: {run_total.prompt_tokens:,} prompt tokens, "
                f"{run_total.cache_read_tokens / run_total.prompt_tokens:.0%} from cache, "
                f"input ${input_cost(run_total):.4f}"
            )
    print("\nTarget: at least 70% of input tokens from cache by turn 5; growth per turn bounded")
    print("by the truncation limit (TOOL_OUTPUT_CHARS, 8,000 characters ≈ 2,000 tokens).")


if __name__ == "__main__":
    asyncio.run(main())
