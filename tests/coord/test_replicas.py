"""Several bot processes on one Redis behave like one bot: a thread's events, wherever they
land, are handled by the replica that owns it; a dead replica's threads are taken over."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.replicas import Replicas, answers, replicas, script
from tests.slack_harness import CHANNEL, all_text
from tests.support import settings_env

INTERRUPTED = "The bot restarted while working on this thread"
RETRIED = "answering the question again now"
LEASE_S = 6  # short, so a killed replica's lease lapses soon; renewed every 2 s, so the
# survivor keeps its own through a 4 s stall of a busy machine


async def ask(r: Replicas, thread: str, words: str, *, to: int | None = None) -> int:
    """A follow-up in the thread; returns the connection its event went to."""
    message = await r.h.slack.post_user_message(CHANNEL, words, thread_ts=thread, connection=to)
    return delivered(r, message["ts"], "message")


async def mention(r: Replicas, words: str) -> tuple[str, int]:
    """A new thread; returns it and the connection its app_mention went to (its owner)."""
    message = await r.h.slack.post_user_message(CHANNEL, words, mention=True)
    return message["ts"], delivered(r, message["ts"], "app_mention")


def delivered(r: Replicas, ts: str, kind: str) -> int:
    """The connection the `kind` event of the user's message `ts` went to."""
    for envelope in r.h.slack.envelopes:
        event = envelope.get("payload", {}).get("event", {})
        if event.get("type") == kind and event.get("ts") == ts and not event.get("bot_id"):
            return r.h.slack.connection_of(envelope["envelope_id"])  # type: ignore[return-value]
    raise AssertionError(f"no {kind} event for {ts}")


def steps(r: Replicas, thread: str) -> int:
    """The thread's messages that show a step: a run's streamed message once its first
    step has begun (the agent style shows each run in one message)."""
    return sum("Step " in all_text(m) for m in r.h.bot_messages(thread))


async def test_follow_ups_on_either_replica_keep_the_thread(
    sandbox_root: Path, monkeypatch
) -> None:
    async with replicas(script, sandbox_root, monkeypatch) as r:
        thread, owner = await mention(r, "note one")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 30)
        landed = {owner}
        for i, words in enumerate(["note two", "hello", "read"]):
            landed.add(await ask(r, thread, words, to=i % 2))
            await r.h.slack.wait_for(lambda n=i: len(answers(r, thread)) == n + 2, 30)
        sandboxes = len(r.h.buddy.sandboxes)

    assert landed == {0, 1}  # the thread's events reached both replicas
    final = answers(r, thread)
    assert final[2] == "answer (3 questions) to: hello"  # history kept across replicas
    assert "note one" in final[3] and "note two" in final[3]  # the same sandbox's files
    assert sandboxes == 1


async def test_a_redelivery_on_the_other_replica_is_ignored(
    sandbox_root: Path, monkeypatch
) -> None:
    async with replicas(script, sandbox_root, monkeypatch) as r:
        event = {
            "type": "app_mention", "user": "U0HUMAN01", "text": "<@U0BOT0001> hi",
            "ts": "1767225600.000700", "channel": CHANNEL, "team": "T0FAKE001",
        }  # fmt: skip
        r.h.slack.add_user_message(CHANNEL, event["text"])  # the thread's parent exists
        for attempt, connection in enumerate((0, 1, 0)):
            await r.h.slack.push_event(
                event, event_id="Ev0TWICE", retry_attempt=attempt, connection=connection
            )
        await r.h.slack.wait_for(lambda: answers(r, event["ts"]) != [], 30)
        # a later follow-up's answer comes after anything the redeliveries could start
        await ask(r, event["ts"], "and?")
        await r.h.slack.wait_for(lambda: len(answers(r, event["ts"])) >= 2, 30)

    said = ["answer (1 questions) to: hi", "answer (2 questions) to: and?"]
    assert answers(r, event["ts"]) == said
    assert len(r.h.model.requests) == 2


async def test_stop_clicked_on_the_replica_not_running_the_run(
    sandbox_root: Path, monkeypatch
) -> None:
    overrides = {"slack_ui": "classic", "stop_by_anyone": True}  # U0HUMAN02 did not ask
    async with replicas(script, sandbox_root, monkeypatch, **overrides) as r:
        thread, owner = await mention(r, "slow")
        await r.h.wait_for_text(thread, "Step 1", timeout=30)
        status = next(m for m in r.h.bot_messages(thread) if "Working on it" in m.get("text", ""))
        await r.h.slack.click_button(status, "stop_run", user="U0HUMAN02", connection=1 - owner)
        await r.h.wait_for_text(thread, "Stopped by <@U0HUMAN02>", timeout=30)

    assert answers(r, thread) == []


async def test_a_sessions_stop_on_the_replica_not_running_the_run(
    sandbox_root: Path, monkeypatch
) -> None:
    """Slack's stop button on the thread's agent session, its event on the other replica:
    the owner stops the run, as with the Stop button."""
    options = {"agent_sessions": True}
    async with replicas(script, sandbox_root, monkeypatch, slack_options=options) as r:
        thread, owner = await mention(r, "slow")
        await r.h.slack.wait_for(lambda: steps(r, thread) > 0, 30)
        stop = await r.h.slack.press_session_stop(CHANNEL, thread, connection=1 - owner)
        await r.h.slack.wait_for_ack(stop)
        await r.h.wait_for_text(thread, "Stopped by <@U0HUMAN01>", timeout=30)
        await r.h.slack.wait_for(lambda: r.h.slack.session_status(CHANNEL, thread) == "active")

    assert r.h.slack.connection_of(stop) == 1 - owner
    assert answers(r, thread) == []


async def test_eight_threads_at_once(sandbox_root: Path, monkeypatch) -> None:
    async with replicas(script, sandbox_root, monkeypatch) as r:
        threads = [(await mention(r, f"note {i}"))[0] for i in range(8)]
        for thread in threads:
            await r.h.slack.wait_for(lambda t=thread: len(answers(r, t)) == 1, 60)
        await asyncio.sleep(0)
        sandboxes = len(r.h.buddy.sandboxes)

    assert all(len(answers(r, t)) == 1 for t in threads)
    assert sandboxes == 8  # one per thread: no thread got a second


async def test_sigkill_mid_run_then_the_survivor_takes_over(
    sandbox_root: Path, monkeypatch
) -> None:
    async with replicas(script, sandbox_root, monkeypatch, replica_lease_s=LEASE_S) as r:
        thread, owner = await mention(r, "note before")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 30)
        await r.h.slack.post_user_message(CHANNEL, "slow", thread_ts=thread, connection=owner)
        await r.h.slack.wait_for(lambda: steps(r, thread) >= 2, 30)  # the slow run's step
        await r.kill(owner)
        await r.h.wait_for_text(thread, RETRIED, timeout=45)  # and the question asked again
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 2, 60)
        await ask(r, thread, "read")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 3, 60)
        sandboxes = len(r.h.buddy.sandboxes)

    said = answers(r, thread)
    assert "slept" in said[1]  # the cut question, answered by the survivor
    assert "note before" in said[2]  # its files, in its sandbox
    assert r.h.texts(thread).count(":warning:") == 1 and sandboxes == 1


async def test_sigterm_of_one_replica(sandbox_root: Path, monkeypatch) -> None:
    async with replicas(script, sandbox_root, monkeypatch) as r:
        thread, owner = await mention(r, "note kept")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 30)
        assert await r.term(owner) == 0
        await ask(r, thread, "read")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 2, 60)

    assert "note kept" in answers(r, thread)[-1]
    assert INTERRUPTED not in r.h.texts(thread)


async def test_redis_restarted_mid_run(sandbox_root: Path, monkeypatch) -> None:
    async with replicas(script, sandbox_root, monkeypatch) as r:
        thread, _ = await mention(r, "slow")
        await r.h.wait_for_text(thread, "Step 1", timeout=30)
        await r.redis.restart(crash=False)
        await r.h.slack.wait_for(lambda: answers(r, thread) or ":warning:" in r.h.texts(thread), 60)
        follow, _ = await mention(r, "after the restart")
        await r.h.slack.wait_for(lambda: len(answers(r, follow)) == 1, 60)

    assert len(answers(r, thread)) <= 1  # answered once, or failed with a clear message
    assert "Traceback" not in r.h.texts(thread)


async def test_redis_unreachable_at_start(sandbox_root: Path, monkeypatch) -> None:
    async with replicas(script, sandbox_root, monkeypatch, n=0) as r:
        env = settings_env(r.h.settings, redis_url="redis://127.0.0.1:9/0")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", env=env, cwd=sandbox_root,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)

    lines = [line for line in (out + err).decode().splitlines() if line.strip()]
    assert proc.returncode == 2
    assert len(lines) == 1 and "REDIS_URL" in lines[0], lines


async def test_a_dead_idle_owner_is_taken_over_at_the_next_message(
    sandbox_root: Path, monkeypatch
) -> None:
    async with replicas(script, sandbox_root, monkeypatch) as r:
        thread, owner = await mention(r, "note idle")
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 1, 30)
        await r.idle()
        await r.kill(owner)  # nothing running: its lease has not lapsed yet
        survivor = 1 - owner
        await ask(r, thread, "read", to=survivor)
        await r.h.slack.wait_for(lambda: len(answers(r, thread)) == 2, 60)
        taken_over = "is gone; taken over here" in r.log(survivor)

    assert taken_over  # at once, not after the dead owner's lease lapsed
    assert "note idle" in answers(r, thread)[-1]
    assert INTERRUPTED not in r.h.texts(thread)
