"""Benchmark: time to first answer on the fake Buddy, cold and with a warm pool.

Run from the repository root: `.venv/bin/python -m bench.first_answer [--boot 8]
[--turn 2] [--threads 3]`.

The fake Buddy boots each sandbox in `--boot` seconds; the fake model takes `--turn`
seconds a turn: a first turn that runs a pandas cell, then the answer. For each new thread
(one at a time, each a mention in the channel) it reports, from the mention:
- the model's first tool call (its first turn returned), and the first tool result (the
  second turn's request, which carries it), and their gap;
- the answer in the thread;
- the sandbox running, and its kernel ready (from the session's log line).
Cold is `WARM_SANDBOXES=0`; warm is `WARM_SANDBOXES=2`, measured once the pool is full.
Medians from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from bench import sandbox_root
from bot.settings import Settings
from tests.fakes.anthropic import Reply, text, tool_use
from tests.slack_harness import CHANNEL, NO_TIERS, Harness, fake_world
from tests.slack_harness import bot_process as running

WARM_IMPORTS = Settings.model_fields["kernel_warm_imports"].default  # the bot's default
CELL = "import pandas as pd\nprint(pd.DataFrame({'n': [1, 2, 3]}).n.sum())"


@dataclass
class Timing:
    first_call: float
    first_result: float
    answer: float
    running: float | None
    kernel: float | None


class Starts(logging.Handler):
    """The session's "sandbox running, kernel ready" lines, as they come."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, float | None]] = []

    def emit(self, record: logging.LogRecord) -> None:
        running = getattr(record, "sandbox_running_s", None)
        if running is not None:
            self.seen.append((running, getattr(record, "kernel_ready_s", None)))


async def measure(
    root: Path, warm: int, boot_s: float, turn_s: float, threads: int
) -> list[Timing]:
    def model(req):
        if req.turn == 0:
            return Reply(
                [tool_use("run_code", {"language": "python", "code": CELL})], delay_s=turn_s
            )
        return Reply([text("The sum is 6.")], delay_s=turn_s)

    starts = Starts()
    logging.getLogger("bot.sessions.session").addHandler(starts)
    logging.getLogger("bot.sessions.session").setLevel(logging.INFO)
    world = fake_world(
        "buddy", model, root, None, NO_TIERS, {"boot_delay_s": boot_s},
        warm_sandboxes=warm, slack_ui="classic", kernel_warm_imports=WARM_IMPORTS,
    )  # fmt: skip
    timings = []
    try:
        async with world as h, running(h):
            for i in range(threads):
                if warm:
                    await h.slack.wait_for(lambda: _free(h) >= warm, boot_s * 4 + 60)
                asked_at = len(h.model.requests)
                seen = len(starts.seen)
                began = time.monotonic()
                asked = await h.slack.post_user_message(CHANNEL, f"sum of n? ({i})", mention=True)
                await h.wait_for_text(asked["ts"], "The sum is 6.", timeout=boot_s * 4 + 60)
                answered = time.monotonic()
                first, second = h.model.requests[asked_at : asked_at + 2]
                await h.slack.wait_for(lambda n=seen: len(starts.seen) > n, 60)
                running_s, kernel_s = starts.seen[seen]
                timings.append(
                    Timing(
                        first.received_at + turn_s - began,
                        second.received_at - began,
                        answered - began,
                        running_s,
                        kernel_s,
                    )
                )
    finally:
        logging.getLogger("bot.sessions.session").removeHandler(starts)
    return timings


def _free(h: Harness) -> int:
    """Free members of the warm pool, as the store has them."""
    return len(h._query("SELECT 1 FROM pool WHERE claimed_at IS NULL"))


def report(name: str, timings: list[Timing]) -> None:
    def med(values: list[float | None]) -> str:
        known = [v for v in values if v is not None]
        return f"{statistics.median(known):6.2f} s" if known else "     -"

    gap = [t.first_result - t.first_call for t in timings]
    print(f"{name} ({len(timings)} threads, medians)")
    print(f"  mention -> model's first tool call   {med([t.first_call for t in timings])}")
    print(f"  mention -> first tool result         {med([t.first_result for t in timings])}")
    print(f"  first tool call -> its result        {med(list(gap))}")
    print(f"  mention -> answer                    {med([t.answer for t in timings])}")
    print(f"  sandbox running (from its request)   {med([t.running for t in timings])}")
    print(f"  kernel ready (from its request)      {med([t.kernel for t in timings])}")


async def main(boot_s: float, turn_s: float, threads: int) -> None:
    print(f"fake Buddy boot {boot_s:g} s, model {turn_s:g} s a turn")
    with sandbox_root() as root:
        report("cold", await measure(root, 0, boot_s, turn_s, threads))
    with sandbox_root() as root:
        report("WARM_SANDBOXES=2", await measure(root, 2, boot_s, turn_s, threads))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boot", type=float, default=8.0)
    parser.add_argument("--turn", type=float, default=2.0)
    parser.add_argument("--threads", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.boot, args.turn, args.threads))
