"""Benchmark: what a thread costs in Slack and how soon it shows a sign, agent style against
classic, against the fake Slack with Slack's rate tiers enforced at their documented rates
(429 with Retry-After past them) and the bot pacing at its defaults.

Run from the repository root: `.venv/bin/python -m bench.slack_agent [--threads 50]`
(`--only 3` runs the third part alone).

1. The population question with its CSV, with a model that answers at once and with one
   that takes 1 s a turn: the Slack Web API calls for the whole question (start-up calls
   such as auth.test left out) and the bot's visible messages (shared files not counted).
2. The first visible sign for a follow-up (the thread's status, a reaction or a post,
   whichever Slack receives first) while 5 other threads in the same channel run: median
   and p95 over `--followups` follow-ups, one after another.
3. `--threads` questions at once in one channel (one tool call each, 1 s a turn): time to
   the first sign and to the answer (median, p95, max), the 429s Slack answered (the
   client waits them out), and the 429s that reached a user: a thread without its answer,
   or with an error in it. More threads than MAX_SANDBOXES (32) at once: each thread ends
   with its answer or a failure, and the threads that failed are counted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import statistics
import time
from collections import Counter
from pathlib import Path

from bench import percentile, sandbox_root
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.scripts import population_analyst
from tests.slack_harness import CHANNEL, Harness, running_bot
from tests.support import POPULATION_CSV

STARTUP = frozenset({"auth.test", "apps.connections.open"})
SIGNS = frozenset({"assistant.threads.setStatus", "reactions.add", "chat.postMessage"})
TIERS = {"rate_limits": 1.0}  # the fake's tiers at Slack's documented rates
ANSWER = "The sum is 6."


def slowly(model, delay_s: float):
    return lambda req: dataclasses.replace(model(req), delay_s=delay_s)


def one_step(req: ModelRequest) -> Reply:
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "python", "code": "print(1+2+3)"})])
    return Reply([text(ANSWER)])


def busy_or_quick(req: ModelRequest) -> Reply:
    """Threads whose question says "busy" run 40 slow steps; others answer at once."""
    if "busy" in str(req.messages[0]):
        if req.turn < 40:
            code = f"print({req.turn})"
            return Reply([tool_use("run_code", {"language": "python", "code": code})], delay_s=1)
        return Reply([text("Done being busy.")])
    return Reply([text("Quick answer.")])


def visible(h: Harness, thread: str) -> list:
    return [m for m in h.bot_messages(thread) if not m.get("files")]


def first_sign(h: Harness, thread: str, message: str, after: float) -> float | None:
    """Seconds from `after` to the first sign Slack received for `message` in `thread`."""
    for call in h.slack.calls:
        if call.at < after or call.method not in SIGNS or call.status != 200:
            continue
        if call.args.get("thread_ts") == thread or call.args.get("timestamp") == message:
            return call.at - after
    return None


async def population(root: Path, ui: str, delay_s: float) -> tuple[Counter, int]:
    model = slowly(population_analyst, delay_s) if delay_s else population_analyst
    async with running_bot("local", model, root, None, TIERS, slack_ui=ui, slack_rate_scale=1) as h:
        before = len(h.slack.calls)
        csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
        message = await h.slack.post_user_message(CHANNEL, "grew most?", files=[csv], mention=True)
        await h.wait_for_text(message["ts"], "5 turns", 60)
        await h.slack.wait_for(
            lambda: any(u.filename == "report.md" for u in h.slack.uploads.values()), 30
        )
        await asyncio.sleep(1.0)  # anything still to come
        calls = Counter(c.method for c in h.slack.calls[before:] if c.method not in STARTUP)
        return calls, len(visible(h, message["ts"]))


async def followups(root: Path, ui: str, n: int) -> list[float]:
    options = {"slack_ui": ui, "slack_rate_scale": 1, "shutdown_grace_s": 0}
    async with running_bot("local", busy_or_quick, root, None, TIERS, **options) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "hello", mention=True))["ts"]
        await h.wait_for_text(thread, "Quick answer.", 30)
        for i in range(5):
            await h.slack.post_user_message(CHANNEL, f"busy {i}", mention=True)
        await asyncio.sleep(5)  # the busy threads are under way
        signs = []
        for i in range(n):
            answered = len(visible(h, thread))
            sent = time.monotonic()
            ts = (await h.slack.post_user_message(CHANNEL, f"and {i}?", thread_ts=thread))["ts"]
            sign = lambda ts=ts, sent=sent: first_sign(h, thread, ts, sent)  # noqa: E731
            await h.slack.wait_for(lambda sign=sign: sign() is not None, 30)
            signs.append(sign() or 0.0)
            await h.slack.wait_for(lambda a=answered: len(visible(h, thread)) > a, 60)
        return signs


async def crowd(root: Path, ui: str, n: int) -> dict[str, object]:
    model = slowly(one_step, 1.0)
    async with running_bot("local", model, root, None, TIERS, slack_ui=ui, slack_rate_scale=1) as h:
        sent: dict[str, float] = {}
        for i in range(n):
            at = time.monotonic()
            sent[(await h.slack.post_user_message(CHANNEL, f"sum {i}?", mention=True))["ts"]] = at
        answered: dict[str, float] = {}
        failed: dict[str, float] = {}

        def done() -> bool:
            for t in sent:
                if t in answered or t in failed:
                    continue
                if any(ANSWER in m.get("text", "") for m in visible(h, t)):
                    answered[t] = time.monotonic() - sent[t]
                elif ":warning:" in h.texts(t):
                    failed[t] = time.monotonic() - sent[t]
            return len(answered) + len(failed) == n

        await h.slack.wait_for(done, 900)
        threads = list(sent)
        signs = [first_sign(h, t, t, sent[t]) or 0.0 for t in threads]
        errors = sum(1 for t in threads if t not in answered or ":warning:" in h.texts(t))
        return {
            "signs": signs,
            "answers": list(answered.values()),
            "failed": list(failed.values()),
            "429s": Counter(c.method for c in h.slack.rate_limited()),
            "reached users": errors,
            "calls": len([c for c in h.slack.calls if c.method not in STARTUP]),
        }


def spread(values: list[float], unit: float = 1000.0, suffix: str = "ms") -> str:
    med = statistics.median(values) * unit
    return (
        f"median {med:.0f} {suffix}, p95 {percentile(values, 0.95) * unit:.0f} {suffix}, "
        f"max {max(values) * unit:.0f} {suffix}"
    )


async def main() -> None:
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # fakes closing at the end
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--followups", type=int, default=20)
    parser.add_argument("--only", type=int, choices=(1, 2, 3), help="run this part alone")
    args = parser.parse_args()
    parts = {args.only} if args.only else {1, 2, 3}
    with sandbox_root() as root:
        if 1 in parts:
            await population_part(root)
        if 2 in parts:
            await followups_part(root, args.followups)
        if 3 in parts:
            await crowd_part(root, args.threads)


async def population_part(root: Path) -> None:
    print("1. The population question with its CSV (Slack's tiers enforced)")
    for delay in (0.0, 1.0):
        for ui in ("classic", "agent"):
            calls, shown = await population(root / f"pop-{ui}-{delay}", ui, delay)
            detail = ", ".join(f"{m} {k}" for m, k in sorted(calls.items()))
            print(
                f"   {ui:7} model {delay:.0f} s/turn: {sum(calls.values())} calls, "
                f"{shown} visible messages ({detail})"
            )


async def followups_part(root: Path, n: int) -> None:
    print("2. First sign for a follow-up while 5 other threads in the channel run")
    for ui in ("classic", "agent"):
        signs = await followups(root / f"follow-{ui}", ui, n)
        print(f"   {ui:7}: {spread(signs)} ({len(signs)} follow-ups)")


async def crowd_part(root: Path, n: int) -> None:
    print(f"3. {n} threads at once in one channel, one tool call each, 1 s a turn")
    for ui in ("classic", "agent"):
        result = await crowd(root / f"crowd-{ui}", ui, n)
        answers, failed = result["answers"], result["failed"]
        print(f"   {ui:7}: first sign {spread(result['signs'])}")
        print(f"            answered {len(answers)}/{n}: {spread(answers, 1, 's')}")
        if failed:
            print(f"            failed {len(failed)}/{n}: {spread(failed, 1, 's')}")
        print(
            f"            Slack calls {result['calls']}, 429s answered "
            f"{dict(result['429s']) or 0}, 429s that reached a user: "
            f"{result['reached users']}"
        )


if __name__ == "__main__":
    asyncio.run(main())
