"""A transcript: question 45 of a thread on a small window still knows what question 3 found.

Run from the repository root: `.venv/bin/python -m bench.long_thread_transcript [--window
20000] [--at 45]`. The thread of `bench.long_threads` (one 8 k-character step and a figure
per question) on a 20,000-token window, so it is cleared and compacted many times before
question 45 asks for question 3's figure. Prints what happened to the context, the start of
what the model was sent at question 45, and its answer.
"""

from __future__ import annotations

import argparse
import asyncio

from bench import sandbox_root
from bot.run_events import ContextTrimmed
from tests.fakes.anthropic import FakeAnthropic
from tests.long_thread import Analyst, question, recall
from tests.support import Recorder, runtime_for


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--window", type=int, default=20_000)
    parser.add_argument("--at", type=int, default=45)
    args = parser.parse_args()
    recorder = Recorder()
    async with FakeAnthropic(Analyst(answer_chars=150), context_window=args.window) as api:
        with sandbox_root() as root:
            runtime = runtime_for(api.base_url, root, context_editing="auto")
            session = runtime.sessions.new("transcript")
            try:
                for n in range(1, args.at):
                    await session.ask(question(n), recorder)
                answer = await session.ask(recall(args.at, of=3), Recorder())
            finally:
                await session.close()
                await runtime.close()
    trims = recorder.of(ContextTrimmed)
    print(f"window {args.window:,} tokens; questions 1-{args.at - 1} each ran a step and answered")
    for kind in ("cleared", "compacted"):
        done = [t for t in trims if t.kind == kind]
        print(f"{kind}: {len(done)} times, by {sorted({t.by for t in done})}")
    messages = api.requests[-1].messages
    print(f"\nat question {args.at}, the model was sent {len(messages)} messages; the first:")
    for line in _text(messages[0]).splitlines()[:8]:
        print(f"  > {line[:110]}")
    print("  > …\nand the last:")
    print(f"  > {_text(messages[-1])[:110]}")
    print(f"\nanswer: {getattr(answer, 'answer', answer)}")


def _text(message: dict) -> str:
    return "\n".join(b.get("text", "") for b in message["content"] if isinstance(b, dict))


if __name__ == "__main__":
    asyncio.run(main())
