"""The app against a Socket Mode as strict as Slack's: every event acked within the deadline
however slow its handling, a redelivered event answered once, sockets the server recycles in
the middle of a run, and Socket Mode turned off."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bot.slack.listen.app import LINK_DISABLED, serve
from bot.slack.listen.startup import SlackSetupError
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack_harness import CHANNEL, Harness, fake_world, running_bot
from tests.support import POPULATION_CSV

ANSWER = "all done"


def answer(req: ModelRequest) -> Reply:
    return Reply([text(ANSWER)])


def one_step(req: ModelRequest) -> Reply:
    """A run that lasts a moment: one step in the sandbox, then the answer."""
    if not req.tool_results():
        code = "import time; time.sleep(1); print('stepped')"
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    return Reply([text(ANSWER)])


def answers(h: Harness, thread: str) -> int:
    return sum(m.get("text") == ANSWER for m in h.bot_messages(thread))


def mention_event(ts: str, text_: str = "go") -> dict:
    return {"type": "app_mention", "user": "U0HUMAN01", "text": f"<@U0BOT0001> {text_}",
            "ts": ts, "channel": CHANNEL, "team": "T0FAKE001"}  # fmt: skip


def in_time(h: Harness) -> list[str]:
    """Envelopes Slack got no ack for within its deadline (none should be)."""
    return h.slack.late_acks + [e["envelope_id"] for e in h.slack.redeliveries]


async def past_deadline(h: Harness, envelope_id: str) -> None:
    """Until Slack's deadline for `envelope_id` has passed (and a redelivery is due)."""
    due = h.slack.sent_at[envelope_id] + h.slack.ack_deadline_s
    await h.slack.wait_for(lambda: time.monotonic() > due, h.slack.ack_deadline_s + 5)


async def test_a_slow_file_download_does_not_hold_up_the_ack(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", answer, sandbox_root, monkeypatch) as h:
        assert h.slack.cdn is not None
        h.slack.cdn.gate = asyncio.Event()  # the CDN answers once the deadline has passed
        csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
        message = await h.slack.post_user_message(CHANNEL, "go", files=[csv], mention=True)
        mention = h.slack.envelopes[-1]["envelope_id"]
        await h.slack.wait_for(lambda: h.slack.cdn.requests != [])
        await past_deadline(h, mention)
        h.slack.cdn.gate.set()
        await h.slack.wait_for(lambda: answers(h, message["ts"]) > 0, 20)
        runs = await h.wait_for_runs(message["ts"], 1)
    assert in_time(h) == []
    assert runs == [("go", "finished")] and answers(h, message["ts"]) == 1


async def test_a_slow_auth_test_on_the_first_event_does_not_hold_up_its_ack(
    sandbox_root: Path, monkeypatch
) -> None:
    """Bolt checks the bot token (auth.test) on the first event, before acking it; a
    rate-limited answer must not make Slack send that event again."""
    async with running_bot("local", answer, sandbox_root, monkeypatch) as h:
        wait = int(h.slack.ack_deadline_s) + 1
        h.slack.fail_next("auth.test", retry_after=wait, optional=True)
        message = await h.slack.post_user_message(CHANNEL, "go", mention=True)
        mention = h.slack.envelopes[-1]["envelope_id"]
        await h.slack.wait_for(lambda: answers(h, message["ts"]) > 0, 20)
        await past_deadline(h, mention)
        runs = await h.wait_for_runs(message["ts"], 1)
    assert in_time(h) == []
    assert runs == [("go", "finished")] and answers(h, message["ts"]) == 1


async def test_an_event_redelivered_after_its_answer_is_not_answered_again(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot("local", answer, sandbox_root, monkeypatch) as h:
        event = mention_event("1767225600.000700")
        await h.slack.wait_for_ack(await h.slack.push_event(event, event_id="Ev0AGAIN01"))
        await h.slack.wait_for(lambda: answers(h, event["ts"]) == 1, 20)
        again = await h.slack.push_event(event, event_id="Ev0AGAIN01")  # its ack went astray
        await h.slack.wait_for_ack(again)
        await h.slack.post_user_message(CHANNEL, "and then?", thread_ts=event["ts"])
        runs = await h.wait_for_runs(event["ts"], 2)  # the redelivery has been handled by now
    redelivery = next(e for e in h.slack.envelopes if e["envelope_id"] == again)
    assert redelivery["retry_attempt"] == 1
    assert runs == [("go", "finished"), ("and then?", "finished")]
    assert answers(h, event["ts"]) == 2


async def test_a_socket_slack_recycles_mid_run_loses_nothing_and_answers_once(
    sandbox_root: Path, monkeypatch
) -> None:
    """Slack closes the socket in the middle of a run, and the question sent just then goes
    down with it: the run finishes, and the lost question, sent again on the new socket,
    is answered once."""
    quiet = {"echo_bot_events": False}  # only the people's events: the one lost is theirs
    async with running_bot("local", one_step, sandbox_root, monkeypatch, quiet) as h:
        first = await h.slack.post_user_message(CHANNEL, "go", mention=True)
        await h.wait_for_text(first["ts"], "Step 1")
        before = h.slack.connections
        # a mention is two events (message, app_mention): both lost
        closed = await h.slack.refresh_socket("refresh_requested", lose=2)
        second = await h.slack.post_user_message(CHANNEL, "and this?", mention=True)
        await h.slack.wait_for(lambda: answers(h, first["ts"]) == 1, 20)
        await h.slack.wait_for(lambda: answers(h, second["ts"]) == 1, 20)
        after = await h.slack.post_user_message(CHANNEL, "then?", thread_ts=second["ts"])
        runs = await h.wait_for_runs(second["ts"], 2)
        await h.wait_for_runs(first["ts"], 1)
    assert [h.slack.connection_of(e) for e in h.slack.lost] == [closed, closed]
    again = [(e["retry_attempt"], e["payload"]["event"]["type"]) for e in h.slack.redeliveries]
    assert again == [(1, "message"), (1, "app_mention")]
    assert all(h.slack.connection_of(e["envelope_id"]) > closed for e in h.slack.redeliveries)
    assert h.slack.connections > before
    last = h.slack.envelopes[-1]
    assert last["payload"]["event"]["ts"] == after["ts"]
    assert h.slack.connection_of(last["envelope_id"]) > closed
    assert runs == [("and this?", "finished"), ("then?", "finished")]
    assert answers(h, first["ts"]) == 1 and answers(h, second["ts"]) == 2


async def test_socket_mode_turned_off_stops_the_app_with_one_clear_error(
    sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world("local", answer, sandbox_root, monkeypatch) as h:
        stop = asyncio.Event()
        task = asyncio.create_task(serve(h.settings, stop))
        try:
            await h.slack.wait_for(lambda: h.slack.connections == 1 or task.done(), 15)
            await h.slack.disable_socket_mode()
            with pytest.raises(SlackSetupError) as error:
                await asyncio.wait_for(task, 30)
        finally:
            stop.set()
            await asyncio.gather(task, return_exceptions=True)
    assert str(error.value) == LINK_DISABLED
    # not a reconnect loop: at most the one the SDK starts before the client is closed
    assert h.slack.link_refusals <= 1
    assert len(h.slack.calls_to("apps.connections.open")) <= 4
