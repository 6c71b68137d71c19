"""Kill-and-restart rounds: the bot process is SIGKILLed at random moments while threads
are being answered, then started again. Counts what a crash costs.

Run from the repository root: `.venv/bin/python -m bench.kill_restart [--rounds 20] [--seed 1]`.
Runs against the fake Slack, model and Buddy servers (Buddy, so every sandbox created and
deleted is counted by its API calls).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import signal
import sys
from pathlib import Path

from bench import sandbox_root
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.sessions.test_restarts import settings_env
from tests.slack_harness import CHANNEL, NO_TIERS, Harness, bot_process, fake_world
from tests.support import POPULATION_CSV


def last_question(req: ModelRequest) -> str:
    for message in reversed(req.messages):
        texts = [b.get("text", "") for b in message["content"] if b.get("type") == "text"]
        if message["role"] == "user" and texts:
            return texts[-1]
    return ""


def script(req: ModelRequest) -> Reply:
    """Each question takes one short command, then an answer naming the question."""
    if req.tool_results() and "done" in req.tool_results()[-1].text:
        return Reply([text(f"answer to: {last_question(req)}")])
    return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 0.4; echo done"})])


async def ask(h: Harness, threads: list[str], n: int, rng: random.Random) -> None:
    question = f"q{n}"
    if threads and rng.random() < 0.5:
        await h.slack.post_user_message(CHANNEL, question, thread_ts=rng.choice(threads))
        return
    csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
    message = await h.slack.post_user_message(CHANNEL, question, files=[csv], mention=True)
    threads.append(message["ts"])


def answers(h: Harness) -> collections.Counter[str]:
    texts = (m.get("text") or "" for m in h.slack.bot_messages(CHANNEL))
    return collections.Counter(
        t.removeprefix("answer to: ") for t in texts if t.startswith("answer to: ")
    )


async def run(rounds: int, seed: int, root: Path) -> None:
    rng = random.Random(seed)
    threads: list[str] = []
    async with fake_world(
        "buddy", script, root, None, NO_TIERS, slack_ui="classic", orphan_min_age_s=0
    ) as h:
        env = settings_env(h.settings)
        for n in range(rounds):
            connections = h.slack.connections
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", env=env, cwd=root,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            await h.slack.wait_for(lambda c=connections: h.slack.connections > c, 30)
            await ask(h, threads, n, rng)
            await asyncio.sleep(rng.uniform(0, 1.5))  # a random moment of the run
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
        # One last start: it restores, tells the interrupted threads, sweeps orphans.
        async with bot_process(h, orphan_cleanup=True):
            await asyncio.sleep(1)
            for i, thread in enumerate(threads):
                await h.slack.post_user_message(CHANNEL, f"continue-{i}", thread_ts=thread)
            await h.slack.wait_for(
                lambda: all(f"continue-{i}" in answers(h) for i in range(len(threads))), 60
            )
            live = set(h.buddy.sandboxes)
        store = SqliteStore(h.settings.store_path)
        await store.open()
        recorded = {r.sandbox_id for r in await store.list_sessions() if r.sandbox_id}
        await store.close()
        assert h.buddy is not None
        owned = {r.json.get("identifier") for r in h.buddy.requests_to("POST", r"/sandboxes$")}
        created = len(owned)
        deleted = len(h.buddy.deleted)
        counts = answers(h)
        notices = sum(
            "restarted while working" in (m.get("text") or "")
            for m in h.slack.bot_messages(CHANNEL)
        )
    print(f"rounds: {rounds} (seed {seed}), threads: {len(threads)}")
    print(
        f"sandboxes created: {created}, destroyed: {deleted}, alive at the end: {len(live)} "
        f"(one per thread at most: {len(live) <= len(threads)})"
    )
    print(f"sandboxes leaked (alive, owned by no thread): {len(live - recorded)}")
    print(f"interruption notices posted: {notices}")
    resumed = sum(1 for i in range(len(threads)) if counts[f"continue-{i}"] >= 1)
    print(f"threads resumed after the last restart: {resumed} of {len(threads)}")
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    print(
        f"answers duplicated: {duplicated}; questions answered before a kill: "
        f"{sum(1 for q in counts if q.startswith('q'))} of {rounds}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with sandbox_root() as root:
        asyncio.run(run(args.rounds, args.seed, root))


if __name__ == "__main__":
    main()
