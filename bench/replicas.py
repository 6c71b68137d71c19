"""Benchmark: several bot replicas on one Redis, against the fake Slack (spreading events
over their connections at random), model and sandboxes.

Run from the repository root: `.venv/bin/python -m bench.replicas [--replicas 1 2 3]
[--threads 200] [--rounds 20]`.

1. Throughput: for 1, 2 and 3 replicas, `--threads` threads started at once (each in its
   own channel; one tool call then the answer; each model turn 1 s, each run_code 0.2 s,
   so 2.2 s ideally, as in bench.concurrency): wall time against ideal, event-loop lag p99
   in each replica, and Redis commands per question (INFO commandstats before and after).
   Each replica is a process of its own with an in-process fake sandbox (a thread stays
   with the replica that owns it, so its sandbox does not need to be shared here).
2. Kills: `--rounds` rounds on two replicas with the fake Buddy (real bot processes): a
   thread asks a question whose step takes 2 s, a random replica is killed (SIGKILL) at a
   random moment within 3 s, and a fresh replica started; then a follow-up in the thread.
   Counted: sandboxes leaked (Buddy sandboxes beyond one per thread), answers duplicated,
   threads resumed (their follow-up answered, with the file written before the kill).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from pathlib import Path

from redis.asyncio import Redis

from bench import percentile, sandbox_root
from bench.concurrency import (
    IDEAL_S,
    PACING_SCALE,
    BotProcess,
    Model,
    Watcher,
    channel_of,
)
from tests.redis_server import redis_server
from tests.replicas import Replicas, answers, replicas, script
from tests.slack_harness import CHANNEL, NO_TIERS, Harness, fake_world
from tests.support import buddy_settings

BATCH_TIMEOUT_S = 300.0


async def redis_counts(url: str) -> tuple[int, float]:
    """Commands Redis has run, and the CPU seconds it has used."""
    client = Redis.from_url(url, decode_responses=True)
    try:
        stats, cpu = await client.info("commandstats"), await client.info("cpu")
        calls = sum(int(v["calls"]) for v in stats.values())
        return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    finally:
        await client.aclose()


async def throughput(n_replicas: int, threads: int, root: Path) -> dict[str, object]:
    model = Model()
    async with redis_server(root / "redis") as redis:
        # Replicas need a shared backend (Buddy's settings); the sandbox here is each
        # process's own fake, which serve() is given (see the module's docstring).
        shared = {"redis_url": redis.url, **buddy_settings("http://127.0.0.1:9")}
        options = {"spread_events": True, **NO_TIERS}
        async with fake_world(
            "local", model, root, None, options, slack_ui="classic", **shared
        ) as h:
            return await _throughput(h, model, redis.url, n_replicas, threads, root)


async def _throughput(
    h: Harness, model: Model, redis_url: str, n_replicas: int, threads: int, root: Path
) -> dict[str, object]:
    update = {"slack_rate_scale": PACING_SCALE, "spool_dir": root / "spool"}
    bots = [BotProcess(h.settings.model_copy(update=update), False) for _ in range(n_replicas)]
    try:
        await h.slack.wait_for(lambda: h.slack.connections >= n_replicas, 60)
        watcher = Watcher(h.slack.calls)
        await h.slack.post_user_message(channel_of(0), "question 0", mention=True)
        await watcher.until(lambda: 0 in watcher.answered, 30)  # warm-up
        before = await redis_counts(redis_url)
        bots_cpu = [(await bot.ask("cpu"))[1] for bot in bots]
        fakes_cpu = time.process_time()
        begin = time.monotonic()
        await asyncio.gather(
            *(
                h.slack.post_user_message(channel_of(i), f"question {i}", mention=True)
                for i in range(1, threads + 1)
            )
        )
        pushed = time.monotonic() - begin
        everyone = set(range(1, threads + 1))
        await watcher.until(lambda: everyone <= watcher.answered.keys(), BATCH_TIMEOUT_S)
        done = {i: at for i, at in watcher.answered.items() if i in everyone}
        end = max(done.values(), default=begin)
        fakes_cpu = time.process_time() - fakes_cpu
        bots_cpu = [
            (await bot.ask("cpu"))[1] - cpu for bot, cpu in zip(bots, bots_cpu, strict=True)
        ]
        lags = [await bot.ask("lag", begin, end) for bot in bots]
        after = await redis_counts(redis_url)
        await watcher.until(lambda: everyone <= watcher.finished.keys(), 60)
    finally:
        for bot in bots:
            await bot.stop()
    wall = end - begin
    return {
        "done": len(done),
        "wall_s": wall,
        "push_s": pushed,
        "ratio": IDEAL_S / wall if wall else 0.0,
        "lag_p99_ms": [percentile(lag, 0.99) * 1000 for lag in lags],
        "redis_per_question": (after[0] - before[0]) / max(len(done), 1),
        "cpu": {"replicas": sum(bots_cpu), "fakes": fakes_cpu, "redis": after[1] - before[1]},
    }


async def kills(rounds: int, root: Path) -> dict[str, int]:
    leaked = duplicated = resumed = 0
    rng = random.Random(7)
    async with replicas(script, root, None) as r:
        for round_ in range(rounds):
            thread = await _killed_round(r, rng, round_)
            if await _resumed(r, thread):
                resumed += 1
            said = answers(r, thread)
            duplicated += max(0, len(said) - len(set(said)))
        assert r.h.buddy is not None
        leaked = len(r.h.buddy.sandboxes) - rounds
    return {"rounds": rounds, "leaked": leaked, "duplicated": duplicated, "resumed": resumed}


async def _killed_round(r: Replicas, rng: random.Random, round_: int) -> str:
    message = await r.h.slack.post_user_message(CHANNEL, f"note r{round_}", mention=True)
    thread = message["ts"]
    await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 60)
    await r.h.slack.post_user_message(CHANNEL, "slow", thread_ts=thread)
    await asyncio.sleep(rng.uniform(0, 3))
    alive = [i for i, p in enumerate(r.procs) if p.returncode is None]
    await r.kill(rng.choice(alive))
    await r.start()
    return thread


async def _resumed(r: Replicas, thread: str) -> bool:
    """The thread answers its next question, with the file written before the kill."""
    try:  # the slow run either finished, or its interruption was told
        await r.h.slack.wait_for(
            lambda: len(answers(r, thread)) >= 2 or "restarted" in r.h.texts(thread), 60
        )
        had = len(answers(r, thread))
        await r.h.slack.post_user_message(CHANNEL, "read", thread_ts=thread)
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) > had, 60)
    except TimeoutError:
        return False
    return "note r" in answers(r, thread)[-1]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(f"1. {args.threads} threads at once; ideal {IDEAL_S:.1f} s")
    with sandbox_root() as root:
        for n in args.replicas:
            result = await throughput(n, args.threads, root / f"throughput-{n}")
            lags = ", ".join(f"{lag:.0f}" for lag in result["lag_p99_ms"])  # type: ignore[attr-defined]
            print(
                f"   {n} replica(s): {result['done']} answered in {result['wall_s']:.2f} s "
                f"(pushing the events took {result['push_s']:.2f} s) "
                f"({result['ratio']:.0%} of ideal); loop lag p99 per replica: {lags} ms; "
                f"Redis commands per question: {result['redis_per_question']:.0f}"
            )
            cpu = result["cpu"]
            total = sum(cpu.values())  # type: ignore[attr-defined]
            print(
                f"      CPU seconds while it ran: replicas {cpu['replicas']:.2f}, fakes "  # type: ignore[index]
                f"{cpu['fakes']:.2f}, redis {cpu['redis']:.2f}; {total:.2f} in all, "  # type: ignore[index]
                f"{total / result['wall_s']:.2f} cores busy of {os.cpu_count()}"  # type: ignore[operator]
            )
        if not args.rounds:
            return
        print(f"2. {args.rounds} rounds, a random replica killed at a random moment")
        outcome = await kills(args.rounds, root / "kills")
        print(
            f"   sandboxes leaked {outcome['leaked']}, answers duplicated "
            f"{outcome['duplicated']}, threads resumed {outcome['resumed']} of {outcome['rounds']}"
        )


if __name__ == "__main__":
    asyncio.run(main())
