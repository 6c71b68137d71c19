"""One run's agent view against the fake Slack, through the real slack_sdk client: the
status kept fresh while a run goes, and a sign in the thread while Slack's rate limits hold
a call back."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.run_events import RunFinished, ToolCallStarted
from bot.sessions.events import OutputsReady, RunStarted
from bot.sessions.outputs import OutputFile
from bot.slack.threads import ThreadRef
from bot.slack.view.assistant_threads import STATUS, AssistantThreads
from bot.slack.view.run_view import SlackRunView
from bot.slack.web import SlackWeb
from bot.usage import Usage
from tests.fakes.slack.api import FakeSlack

CHANNEL, TEAM, HUMAN = "C0CHAN001", "T0FAKE001", "U0HUMAN01"
STEP = ToolCallStarted("toolu_1", "run_code", "python", "print(1)")
DONE = RunFinished("Done.", turns=2, usage=Usage(), cost_usd=0.01, stop="end_turn")


pytestmark = pytest.mark.usefixtures("no_proxy")  # loopback calls, straight


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(rate_limits=1.0) as fake:
        yield fake


def thread_of(slack: FakeSlack, rate_scale: float = 1000) -> tuple[AssistantThreads, ThreadRef]:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    ts = slack.add_user_message(CHANNEL, "<@U0BOT0001> how many?")["ts"]
    return AssistantThreads(SlackWeb(client, rate_scale=rate_scale)), ThreadRef(TEAM, CHANNEL, ts)


async def test_the_status_is_kept_fresh_while_a_run_goes_and_cleared_at_its_end(
    slack: FakeSlack,
) -> None:
    threads, ref = thread_of(slack)
    run = SlackRunView(threads.web, ref, 1.0, threads, refresh_s=0.1)
    await run(RunStarted("run-1", "how many?", 1.0, user=HUMAN))
    await run(STEP)  # starts the stream, which clears the status
    await slack.wait_for(lambda: slack.status_history(CHANNEL, ref.ts).count(STATUS) >= 3)
    await run(DONE)

    history = slack.status_history(CHANNEL, ref.ts)
    after_stream = [s for s in slack.statuses if s.at > slack.calls_to("chat.startStream")[0].at]
    assert any(s.loading_messages == ("Step 1 · python: print(1)",) for s in after_stream)
    assert history[-1] == ""  # cleared by the bot: the streamed message was no new reply


async def test_a_wait_for_slacks_rate_limits_is_shown(slack: FakeSlack) -> None:
    threads, ref = thread_of(slack, rate_scale=1.0)
    for _ in range(3):  # other runs took the burst of stream starts (Tier 2)
        await threads.web.pacer.take("chat.startStream")
    run = SlackRunView(threads.web, ref, 1.0, threads)
    await run(RunStarted("run-1", "how many?", 1.0, user=HUMAN))
    await run(STEP)  # the stream's start waits about 3 s; the status says so meanwhile
    await slack.wait_for(lambda: waiting(slack))
    await slack.wait_for(lambda: slack.calls_to("chat.startStream"))
    await run(DONE)

    [first] = waiting(slack)
    assert first.status == STATUS and first.loading_messages[1] == "Step 1 · python: print(1)"
    assert 2 < int(first.loading_messages[0].split()[2].rstrip("s")) <= 4
    assert first.at < slack.calls_to("chat.startStream")[0].at
    [stream] = slack.streams.values()
    assert stream.stopped and "Done." in stream.text
    assert not slack.rate_limited()


async def report_files():
    async def content():
        yield b"# Report\n"

    for name in ("report.md", "a.csv", "b.csv"):
        yield OutputFile(name, content())


async def test_a_wait_for_an_upload_leaves_no_status_behind(slack: FakeSlack) -> None:
    """Files are shared a moment after their upload, and a share is no reply that clears
    the thread's status: a wait shown there for the upload is cleared by the bot."""
    threads, ref = thread_of(slack, rate_scale=1.0)
    for _ in range(19):  # other threads took the burst of uploads (Tier 4)
        await threads.web.pacer.take("files.upload")
    view = SlackRunView(threads.web, ref, 1.0, threads)
    await view(RunStarted("run-1", "how many?", 1.0, user=HUMAN))
    await view(STEP)
    await view(DONE)
    await view(OutputsReady(report_files))
    shared = lambda: [u for u in slack.uploads.values() if u.shared_ts]  # noqa: E731
    await slack.wait_for(lambda: len(shared()) == 3)

    assert any(s.loading_messages[0].startswith("Wait") for s in slack.statuses if s.status)
    assert slack.thread_status(CHANNEL, ref.ts) == ""


def waiting(slack: FakeSlack) -> list:
    return [s for s in slack.statuses if s.status and s.loading_messages[0].startswith("Wait")]
