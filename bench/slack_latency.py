"""Benchmark: how fast the Slack app answers an event, against the fake Slack.

Run from the repository root: `.venv/bin/python -m bench.slack_latency [--events N]`.
For each mention: the time from the envelope leaving the fake's socket to the bot's ack,
and to the first message the bot posts in the thread (the status line), with a model
that answers at once. Also counts the Slack calls of one typical session (the population
question with its CSV). Medians and p95 from one run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from pathlib import Path

from bench import percentile, sandbox_root
from tests.fakes.anthropic import Reply, text
from tests.scripts import population_analyst
from tests.slack_harness import CHANNEL, NO_TIERS, running_bot
from tests.support import POPULATION_CSV


async def latencies(root: Path, events: int) -> tuple[list[float], list[float]]:
    acks, firsts = [], []
    quick = lambda req: Reply([text("ok")])  # noqa: E731
    async with running_bot("local", quick, root, None, NO_TIERS, slack_ui="classic") as h:
        for i in range(events):
            event = {
                **{"type": "app_mention", "user": "U0HUMAN01", "text": f"<@U0BOT0001> q{i}"},
                **{"ts": f"17672256{i:02d}.000100", "channel": CHANNEL, "team": "T0FAKE001"},
            }
            before = len(h.slack.calls)
            envelope = await h.slack.push_event(event)
            await h.slack.wait_for_ack(envelope)
            posted = lambda before=before, ts=event["ts"]: _first_post(h, before, ts)  # noqa: E731
            await h.slack.wait_for(lambda posted=posted: posted() is not None)
            sent = h.slack.sent_at[envelope]
            acks.append(h.slack.acked_at[envelope] - sent)
            firsts.append(posted() - sent)
            await h.wait_for_text(event["ts"], "1 turn")
    return acks, firsts


def _first_post(h, before: int, thread_ts: str) -> float | None:
    for call in h.slack.calls[before:]:
        if call.method == "chat.postMessage" and call.args.get("thread_ts") == thread_ts:
            return call.at
    return None


async def session_calls(root: Path) -> dict[str, int]:
    async with running_bot(
        "local", population_analyst, root, None, NO_TIERS, slack_ui="classic"
    ) as h:
        csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
        message = await h.slack.post_user_message(CHANNEL, "grew most?", files=[csv], mention=True)
        await h.slack.wait_for(
            lambda: any(u.filename == "report.md" for u in h.slack.uploads.values()), 30
        )
        await asyncio.sleep(0.5)
        counts = h.slack.method_counts()
        print("\nthe thread as it reads:")
        for line in h.slack.thread(CHANNEL, message["ts"]):
            print("  |", (line.get("text") or "").replace("\n", "\n  | ")[:400])
    return counts


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=30)
    events = parser.parse_args().events
    with sandbox_root() as root:
        acks, firsts = await latencies(root, events)
        counts = await session_calls(root)
    ms = lambda xs, q: percentile(xs, q) * 1000  # noqa: E731
    median = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    print(f"\nevent → ack: median {median(acks):.1f} ms, p95 {ms(acks, 0.95):.1f} ms")
    print(
        f"event → first message in the thread: median {statistics.median(firsts) * 1000:.1f} ms, "
        f"p95 {ms(firsts, 0.95):.1f} ms"
    )
    print(
        "Slack calls in one population session:",
        ", ".join(f"{m} {n}" for m, n in sorted(counts.items())),
    )


if __name__ == "__main__":
    asyncio.run(main())
