"""A stop pressed on the thread's agent session before the question's run has started (its
file still downloading, say) cancels it: the thread is told the question was stopped, no
answer comes and nothing reaches the model; someone who may not stop it is told so, and
the question is answered."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.anthropic import ModelRequest, Reply, text
from tests.slack.test_slack_agent_sessions import SESSIONS, TEAM, told
from tests.slack_harness import CHANNEL, Harness, running_bot
from tests.support import POPULATION_CSV

STOPPED = "Stopped by <@U0HUMAN01>"


def answer(req: ModelRequest) -> Reply:
    return Reply([text("the answer")])


async def ask_with_a_slow_file(h: Harness) -> str:
    """A question with a file whose download waits for the CDN's gate."""
    assert h.slack.cdn is not None
    h.slack.cdn.gate = asyncio.Event()
    csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
    message = await h.slack.post_user_message(CHANNEL, "count", files=[csv], mention=True)
    await h.slack.wait_for(lambda: h.slack.cdn.requests != [])  # type: ignore[union-attr]
    await h.slack.wait_for(lambda: h.slack.session_status(CHANNEL, message["ts"]) == "processing")
    return message["ts"]


async def test_a_stop_before_the_run_starts_cancels_the_question(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", answer, sandbox_root, monkeypatch, SESSIONS) as h:
        thread = await ask_with_a_slow_file(h)
        await h.slack.wait_for_ack(await h.slack.press_session_stop(CHANNEL, thread))
        h.slack.cdn.gate.set()  # type: ignore[union-attr]
        await h.wait_for_text(thread, STOPPED, timeout=30)
        await h.slack.wait_for(lambda: h.slack.session_status(CHANNEL, thread) == "active")
        await asyncio.sleep(1)  # a run that still started would reach the model by now
        texts = h.texts(thread)

    assert h.model.requests == []
    assert "the answer" not in texts and texts.count(STOPPED) == 1


async def test_a_stop_before_the_start_from_someone_who_may_not_is_refused(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", answer, sandbox_root, monkeypatch, SESSIONS, **TEAM) as h:
        thread = await ask_with_a_slow_file(h)
        stop = await h.slack.press_session_stop(CHANNEL, thread, user="U0HUMAN02")
        await h.slack.wait_for_ack(stop)
        h.slack.cdn.gate.set()  # type: ignore[union-attr]
        await h.wait_for_text(thread, "the answer", timeout=30)
        refused = told(h, "U0HUMAN02")

    assert len(h.model.requests) == 1 and "Stopped" not in h.texts(thread)
    assert len(refused) == 1 and "U0HUMAN01" in refused[0]
