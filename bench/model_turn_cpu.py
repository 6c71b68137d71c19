"""Benchmark: the bot's CPU per model turn, streamed against answered whole.

Run from the repository root: `.venv/bin/python -m bench.model_turn_cpu`.

The bot's model client (`build_client`) asks a fake Messages API for turns like a run's
first: a system prompt of about 7 KB, ten tools, one question, and an answer of a sentence
and a `run_code` call with 1 KB of code. The fake serves in a thread of its own, and the
CPU time of the client's thread alone is counted (`time.thread_time`), per turn, with 1
and 200 turns in flight. Each way is measured with the fake's default deltas (two or three
per block) and with deltas of 12 characters, about as fine as the real API streams them.

- streamed: `messages.stream(...)` and `get_final_message()`, as the bot did;
- whole: `messages.create(...)`, one JSON answer, as the bot now does unless the SDK says
  the turn's `max_tokens` needs a stream.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from typing import Any

import anthropic

from bot.agent.model_client import build_client
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.support import settings_for

CODE = "import pandas as pd\n" + "df = pd.read_csv('data.csv')\nprint(df.describe())\n" * 14
TOOLS = [
    {
        "name": f"tool_{i}",
        "description": "Does one thing to the data. " * 12,
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "string", "description": "what to do " * 8}},
            "required": ["a"],
        },
    }
    for i in range(10)
]
PARAMS: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 16_000,
    "system": "You analyse data by writing and running code. " * 150,
    "tools": TOOLS,
    "messages": [{"role": "user", "content": "Which five countries grew fastest since 2000?"}],
}
TURNS, ROUNDS = 200, 3


def model_fn(_req: ModelRequest) -> Reply:
    words = text("Let me look at the data first. " * 5)
    return Reply([words, tool_use("run_code", {"code": CODE})])


async def turn(client: anthropic.AsyncAnthropic, streamed: bool) -> None:
    if streamed:
        async with client.messages.stream(**PARAMS) as stream:
            await stream.get_final_message()
    else:
        await client.messages.create(**PARAMS)


async def cpu_per_turn(base_url: str, streamed: bool, in_flight: int) -> float:
    """The client thread's CPU per turn, in ms: the median of ROUNDS rounds of TURNS."""
    client = build_client(settings_for(base_url, "/tmp"))
    await asyncio.gather(*(turn(client, streamed) for _ in range(in_flight)))  # warm up
    rounds = []
    for _ in range(ROUNDS):
        began = time.thread_time()
        for _ in range(TURNS // in_flight):
            await asyncio.gather(*(turn(client, streamed) for _ in range(in_flight)))
        rounds.append((time.thread_time() - began) / TURNS * 1000)
    await client.close()
    return statistics.median(rounds)


def serve(delta_chars: int | None, ready: threading.Event, where: dict[str, str]) -> None:
    async def main() -> None:
        fake = FakeAnthropic(model_fn, min_cache_tokens=10**9, delta_chars=delta_chars)
        async with fake:
            where["url"] = fake.base_url
            ready.set()
            await asyncio.Event().wait()

    asyncio.run(main())


def main() -> None:
    print("the bot's CPU per model turn (client thread), median of 3 rounds of 200 turns")
    print(f"{'deltas':<22} {'in flight':>9} {'streamed':>10} {'whole':>8} {'ratio':>6}")
    for delta_chars, label in ((None, "2-3 per block (fake)"), (12, "12 chars (as real)")):
        ready, where = threading.Event(), {}
        threading.Thread(target=serve, args=(delta_chars, ready, where), daemon=True).start()
        ready.wait()
        for in_flight in (1, 200):
            streamed = asyncio.run(cpu_per_turn(where["url"], True, in_flight))
            whole = asyncio.run(cpu_per_turn(where["url"], False, in_flight))
            print(
                f"{label:<22} {in_flight:>9} {streamed:>8.2f}ms {whole:>6.2f}ms "
                f"{streamed / whole:>5.1f}x"
            )


if __name__ == "__main__":
    main()
