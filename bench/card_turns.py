"""What a data card saves the model: turns and input tokens for the population question,
with the card in the prompt and without it.

The scripted model explores only what it was not told. Before the analysis it wants three
facts: the file's shape (rows and columns), the columns' types, and which rows are
aggregates. Each fact the system prompt does not state costs one exploring tool call (a
`wc`/`head`, a type check, a list of distinct names), one turn each. Then it runs the
analysis and answers: two turns. So it takes 2 turns with the card and 5 without.

    .venv/bin/python -m bench.card_turns
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from bench import sandbox_root
from bot.compose import Runtime
from bot.run_events import RunFinished, discard
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import POPULATION_CSV, file_chunks, settings_for

CSV = "/buddy/work/uploads/population_2000_2010_2020.csv"
FACTS = {  # what the model must know -> (how it sees it was told, how it finds out)
    "shape": ("rows ×", f"wc -l {CSV}; head -3 {CSV}"),
    "types": ("integer", f"tail -n +2 {CSV} | cut -d, -f3,4 | sort -u | head"),
    "aggregates": ("Aggregate rows", f"cut -d, -f1 {CSV} | sort -u"),
}
ANALYSIS = "import csv; print('India, China, Nigeria')"


def explorer(req: Any) -> Reply:
    explored = sum(1 for m in req.messages if m["role"] == "assistant")
    missing = [cmd for told, cmd in FACTS.values() if told not in req.system_text]
    if explored < len(missing):
        return Reply([tool_use("run_code", {"language": "bash", "code": missing[explored]})])
    if explored == len(missing):
        return Reply([tool_use("run_code", {"language": "python", "code": ANALYSIS})])
    return Reply([text("India, China and Nigeria grew most.")])


async def one(card: bool, root: Path) -> tuple[int, int]:
    async with FakeAnthropic(explorer) as fake:
        runtime = Runtime.from_settings(settings_for(fake.base_url, root))
        session = runtime.sessions.new(f"bench-card-{card}")
        try:
            await session.add_file(POPULATION_CSV.name, lambda: file_chunks(POPULATION_CSV))
            if not card:  # the same file, told to the model by its path and first line only
                session.intakes = [
                    dataclasses.replace(i, file=dataclasses.replace(i.file, cards=()))
                    for i in session.intakes
                ]
            result = await session.ask("Which three countries grew most, 2000 to 2020?", discard)
        finally:
            await session.close()
            await runtime.close()
    assert isinstance(result, RunFinished), result
    return result.turns, result.usage.prompt_tokens


async def main() -> None:
    with sandbox_root() as root:
        with_card = await one(True, root)
        without = await one(False, root)
    print("population question, scripted model that explores only what it was not told")
    print(f"{'':14}{'turns':>7}{'input tokens':>14}")
    print(f"{'with card':14}{with_card[0]:>7}{with_card[1]:>14,}")
    print(f"{'without card':14}{without[0]:>7}{without[1]:>14,}")
    print(f"input tokens with / without: {with_card[1] / without[1]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
