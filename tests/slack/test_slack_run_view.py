"""SlackRunView's states, against the fake Slack through the real client; and Slack's error
codes read once into the bot's own types (errors.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.run_events import RunFinished, ToolCallFinished, ToolCallStarted
from bot.sessions.events import RunStarted, RunStopped
from bot.slack.threads import ThreadRef
from bot.slack.view.assistant_threads import AssistantThreads
from bot.slack.view.run_view import ChannelGone, Phase, SlackRunView
from bot.slack.web import SlackWeb, errors
from bot.usage import Usage
from tests.fakes.slack.api import FakeSlack

CHANNEL, TEAM, HUMAN = "C0CHAN001", "T0FAKE001", "U0HUMAN01"
STEP = ToolCallStarted("toolu_1", "run_code", "python", "print(1)")
STEP_DONE = ToolCallFinished("toolu_1", "run_code", "ok", 0, 0.1, "1", "python", "print(1)")
DONE = RunFinished("Done.", turns=2, usage=Usage(), cost_usd=0.01, stop="end_turn")
STARTED = RunStarted("run-1", "how many?", 1.0, user=HUMAN)

pytestmark = pytest.mark.usefixtures("no_proxy")  # loopback calls, straight


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


def view_of(slack: FakeSlack, *, assistant: bool) -> tuple[SlackRunView, ThreadRef]:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    web = SlackWeb(client, rate_scale=1000)
    ts = slack.add_user_message(CHANNEL, "<@U0BOT0001> how many?")["ts"]
    ref = ThreadRef(TEAM, CHANNEL, ts)
    return SlackRunView(web, ref, 1.0, AssistantThreads(web) if assistant else None), ref


def replies(slack: FakeSlack, ref: ThreadRef) -> list[str]:
    return [m.get("text", "") for m in slack.thread(CHANNEL, ref.ts)[1:]]


async def test_classic_not_started_then_classic_then_finished(slack: FakeSlack) -> None:
    view, ref = view_of(slack, assistant=False)
    assert view.phase is Phase.NOT_STARTED
    await view(STARTED)
    assert view.phase is Phase.CLASSIC
    await view(STEP)
    await view(STEP_DONE)
    await view(DONE)
    assert view.phase is Phase.FINISHED
    status, *rest = replies(slack, ref)  # the status line, edited in place
    assert status.startswith(":white_check_mark: Done · 1 step · ")
    assert rest == ["Step 1: python ok", "Done."]


async def test_agent_streams_for_the_asker_then_finishes(slack: FakeSlack) -> None:
    view, _ = view_of(slack, assistant=True)
    await view(STARTED)
    assert view.phase is Phase.STREAMING
    await view(STEP)
    await view(STEP_DONE)
    await view(DONE)
    assert view.phase is Phase.FINISHED
    [start] = slack.calls_to("chat.startStream")
    assert start.args["recipient_user_id"] == HUMAN  # from RunStarted.user
    [stream] = slack.streams.values()
    assert stream.stopped and "Done." in stream.text


async def test_a_refused_stream_falls_back_to_classic(slack: FakeSlack) -> None:
    slack.fail_next("chat.startStream", status=200, error="feature_not_enabled")
    view, ref = view_of(slack, assistant=True)
    await view(STARTED)
    await view(STEP)  # its stream start is refused in the background
    await slack.wait_for(lambda: slack.calls_to("chat.startStream"))
    await slack.wait_for(lambda: view._streamed is not None and view._streamed.refused)
    await view(STEP_DONE)
    assert view.phase is Phase.CLASSIC
    await view(DONE)
    assert view.phase is Phase.FINISHED and "Done." in replies(slack, ref)


async def test_a_stop_ends_the_run_stopped(slack: FakeSlack) -> None:
    view, ref = view_of(slack, assistant=False)
    await view(STARTED)
    await view(RunStopped(by=HUMAN))
    assert view.phase is Phase.STOPPED
    assert any(f"Stopped by <@{HUMAN}>" in text for text in replies(slack, ref))


async def test_a_channel_the_bot_left_stops_the_run(slack: FakeSlack) -> None:
    view, _ = view_of(slack, assistant=False)
    slack.remove_bot(CHANNEL)
    with pytest.raises(ChannelGone):
        await view(STARTED)
    await view(STEP)  # nothing more is sent, and nothing raised


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("not_in_channel", 200, errors.SlackGone),
        ("is_archived", 200, errors.SlackGone),
        ("missing_scope", 200, errors.SlackRefused),
        ("message_not_in_streaming_state", 200, errors.StreamClosed),
        ("invalid_blocks", 200, errors.SlackMalformed),
        ("ratelimited", 429, errors.SlackBusy),
        ("", 503, errors.SlackBusy),
        ("already_reacted", 200, errors.SlackError),
    ],
)
def test_slacks_codes_become_the_bots_types(code: str, status: int, kind: type) -> None:
    error = errors.slack_error("chat.postMessage", code, status)
    assert type(error) is kind and error.code == code and error.status == status


def test_a_stop_pressed_in_slack_is_a_closed_stream_by_the_user() -> None:
    assert errors.slack_error("chat.appendStream", "stopped_by_user", 200).by_user
