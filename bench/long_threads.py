"""Benchmark: prompt tokens and cost per question over a 60-question thread, with the history
sent whole (CONTEXT_EDITING=off, the old behaviour) and kept within bounds (the bot's own
clearing and compaction, and the API's betas as the fake Messages API implements them).

Run from the repository root: `.venv/bin/python -m bench.long_threads [--questions 60]
[--clear-tokens 30000] [--png docs/long_threads.png]`.

Each question runs one Python step in a local sandbox that prints about 8 k characters and a
figure, then the scripted model answers with the figure (`tests/long_thread.py`); at the last
question it is asked for the figure of question 3. The fake counts a token per 4 characters
and keeps a prompt cache, so the cost is the list price of the default model on those counts
(cache writes and reads included). The window is 200,000 tokens (Haiku 4.5, Opus 4.5); the
clearing threshold is set, as a team would to bound cost, and compaction is at 1.5 times it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path
from typing import Any

from bench import sandbox_root
from bench.curve import write_png
from bot.run_events import ModelTurn, RunFinished
from tests.fakes.anthropic import FakeAnthropic
from tests.long_thread import Analyst, question, recall
from tests.support import Recorder, runtime_for

WINDOW = 200_000
MODES = {
    "whole (off)": ({"context_editing": "off"}, {}),
    "bot clears": ({"context_editing": "client"}, {"context_editing": "ignore"}),
    "API betas": ({"context_editing": "auto"}, {"context_editing": "apply"}),
}


async def thread(questions: int, settings: dict[str, Any], fake: dict[str, Any]) -> list[dict]:
    """Per question: the prompt of its last turn, its total prompt tokens and its cost."""
    rows: list[dict] = []
    async with FakeAnthropic(Analyst(), context_window=WINDOW, **fake) as api:
        with sandbox_root() as root:
            runtime = runtime_for(api.base_url, root, **settings)
            session = runtime.sessions.new("bench-long")
            try:
                for n in range(1, questions + 1):
                    recorder = Recorder()
                    asked = recall(n, of=3) if n == questions else question(n)
                    result = await session.ask(asked, recorder)
                    rows.append(_row(n, result, recorder))
            finally:
                await session.close()
                await runtime.close()
    return rows


def _row(n: int, result: Any, recorder: Recorder) -> dict:
    turns = [t for t in recorder.of(ModelTurn) if t.purpose == "answer"]
    ok = isinstance(result, RunFinished)
    return {
        "n": n,
        "prompt": turns[-1].usage.prompt_tokens if turns else 0,
        "tokens": sum(t.usage.prompt_tokens for t in recorder.of(ModelTurn)),
        "cost": result.cost_usd or 0.0 if ok else 0.0,
        "ok": ok,
        "answer": result.answer if ok else getattr(result, "reason", ""),
    }


def _report(results: dict[str, list[dict]], points: list[int]) -> None:
    print("| question | " + " | ".join(f"{m}: prompt, $" for m in results) + " |")
    print("|---|" + "---|" * len(results))
    for n in points:
        cells = [f"{r[n - 1]['prompt']:,}, {r[n - 1]['cost']:.4f}" for r in results.values()]
        print(f"| {n} | " + " | ".join(cells) + " |")
    for mode, rows in results.items():
        q10, last = rows[9], rows[-2]  # the last question is the recall
        tail = statistics.median(r["cost"] for r in rows[40:-1])
        peak = max(r["cost"] for r in rows[40:-1])
        total = sum(r["cost"] for r in rows)
        print(
            f"{mode}: question {last['n']} / question 10 = {last['cost'] / q10['cost']:.2f}× in "
            f"cost, {last['prompt'] / q10['prompt']:.2f}× in prompt; median cost of 41-"
            f"{last['n']}: ${tail:.4f} (max ${peak:.4f}); thread ${total:.3f}; answered "
            f"{sum(r['ok'] for r in rows)}/{len(rows)}; last answer: {rows[-1]['answer'][:70]!r}"
        )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--questions", type=int, default=60)
    parser.add_argument("--clear-tokens", type=int, default=30_000)
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {}
    for mode, (settings, fake) in MODES.items():
        limits = {"context_clear_tokens": args.clear_tokens} if mode != "whole (off)" else {}
        results[mode] = await thread(args.questions, {**settings, **limits}, fake)
    points = sorted({1, 5, 10, 20, 30, 40, 50, args.questions - 1, args.questions})
    _report(results, [p for p in points if p <= args.questions])
    if args.png:
        series = {m: [r["prompt"] for r in rows] for m, rows in results.items()}
        write_png(args.png, series, title="prompt tokens per question")
        print(f"curve: {args.png}")


if __name__ == "__main__":
    asyncio.run(main())
