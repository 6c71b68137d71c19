"""Schedules in Slack, end to end with the real bot: the model proposes one, the person who
asked sees it in words in their time zone and confirms it (no one else can), Cancel leaves
nothing, and a due schedule fires once in its thread, as a run of its own."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bot.store.base import ScheduleRecord, SessionRecord
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import Reply, http_error, text, tool_use
from tests.fakes.slack import DEFAULT_SCOPES
from tests.git_http import GIT_ENV, make_repo
from tests.slack.test_slack_show_work import with_button
from tests.slack_harness import CHANNEL, Harness, bot_process, fake_world

ASK = "every Monday at 9:00 post this again"
RERUN = "How many countries are in the data?"
WITH_ZONES = {"scopes": (*DEFAULT_SCOPES, "users:read")}


def proposer(req):
    if "ANSWER THE RERUN" in json.dumps(req.body["messages"]):
        return Reply([text("There are 265 rows.")])
    if req.turn == 0 and "schedule_run" in req.tools:
        last = json.dumps(req.body["messages"][-1])
        if "every Monday" in last:
            return Reply([tool_use("schedule_run", {"cron": "0 9 * * 1", "question": RERUN})])
    return Reply([text("Answered: 265 countries.")])


async def store_of(h: Harness) -> SqliteStore:
    store = SqliteStore(h.settings.store_path)
    await store.open()
    return store


async def schedules(h: Harness) -> list[ScheduleRecord]:
    store = await store_of(h)
    try:
        return await store.list_schedules()
    finally:
        await store.close()


def proposal_of(h: Harness, thread: str) -> dict[str, Any]:
    [message] = with_button(h, thread, "schedule_confirm")
    return message


async def test_a_proposal_is_confirmed_by_the_asker_only(sandbox_root: Path, monkeypatch) -> None:
    world = fake_world("local", proposer, sandbox_root, monkeypatch, WITH_ZONES)
    async with world as h, bot_process(h):
        asked = await h.slack.post_user_message(CHANNEL, ASK, mention=True)
        thread = asked["ts"]
        await h.slack.wait_for(lambda: with_button(h, thread, "schedule_confirm"), 30)
        proposal = proposal_of(h, thread)
        said = json.dumps(proposal["blocks"])
        [proposed] = await schedules(h)
        ephemerals = len(h.slack.ephemerals)
        await h.slack.click_button(proposal, "schedule_confirm", user="U0HUMAN02")
        await h.slack.wait_for(lambda: len(h.slack.ephemerals) > ephemerals, 10)
        refused = h.slack.ephemerals[-1]
        still = await schedules(h)
        await h.slack.click_button(proposal, "schedule_confirm", user="U0HUMAN01")
        await h.slack.wait_for(lambda: "Scheduled by" in h.texts(thread), 10)
        [confirmed] = await schedules(h)
    assert "At 09:00, only on Monday, Europe/London; next Mon" in said
    assert RERUN in said and "Only <@U0HUMAN01> can confirm it." in said
    assert (proposed.state, proposed.cron, proposed.zone) == (
        "proposed",
        "0 9 * * 1",
        "Europe/London",
    )
    assert proposed.owner == "U0HUMAN01" and proposed.question == RERUN
    assert refused["user"] == "U0HUMAN02" and "Only <@U0HUMAN01> can confirm" in refused["text"]
    assert [s.state for s in still] == ["proposed"]
    assert confirmed.state == "active"
    assert not with_button(h, thread, "schedule_confirm")  # the buttons are gone


async def test_cancel_leaves_nothing_and_a_zone_slack_hides_is_utc(
    sandbox_root: Path, monkeypatch
) -> None:
    world = fake_world("local", proposer, sandbox_root, monkeypatch)  # no users:read
    async with world as h, bot_process(h):
        asked = await h.slack.post_user_message(CHANNEL, ASK, mention=True)
        thread = asked["ts"]
        await h.slack.wait_for(lambda: with_button(h, thread, "schedule_confirm"), 30)
        proposal = proposal_of(h, thread)
        said = json.dumps(proposal["blocks"])
        await h.slack.click_button(proposal, "schedule_cancel", user="U0HUMAN01")
        await h.slack.wait_for(lambda: "Schedule cancelled" in h.texts(thread), 10)
        left = await schedules(h)
    assert "UTC; next Mon" in said and "could not be read, so the times are UTC" in said
    assert left == []


async def test_a_due_schedule_fires_once_and_compares_with_the_last_firing(
    sandbox_root: Path, monkeypatch
) -> None:
    world = fake_world(
        "local", proposer, sandbox_root, monkeypatch, schedule_min_interval_s=60,
        schedule_tick_s=0.1,
    )  # fmt: skip
    async with world as h, bot_process(h):
        thread = (await h.slack.post_user_message(CHANNEL, "a thread", mention=False))["ts"]
        key = f"{h.slack.team_id}:{CHANNEL}:{thread}"
        store = await store_of(h)
        try:
            now = time.time()
            last = (now // 60 - 2) * 60  # two minutes back: one firing since is missed
            await seed_last_firing(store, key, now, last)
            await h.slack.wait_for(lambda: "There are 265 rows." in h.texts(thread), 30)
            await h.slack.wait_for(lambda: "Since the last firing" in h.texts(thread), 10)
            await store.update_schedule("every-minute", state="paused")
            async with asyncio.timeout(30):  # the firing's end, recorded after its answer
                while True:
                    firings = await store.firings("every-minute")
                    if firings[0].outcome:
                        break
                    await asyncio.sleep(0.05)
        finally:
            await store.close()
    said = h.texts(thread)
    assert "Scheduled run (Every minute, UTC; next" in said
    assert "Since the last firing (" in said and "260 → 265 (+1.9%)" in said
    assert [f.outcome for f in firings] == ["finished", "finished"]  # this one, and the seed
    assert firings[0].run_id and firings[0].run_id != "seeded-run"


async def seed_last_firing(store: SqliteStore, key: str, now: float, last: float) -> None:
    """A schedule whose last firing answered with the figure 260."""
    await store.save_session(SessionRecord(key, None, "idle", None, now, now))
    await store.start_run(key, "seeded-run", "ANSWER THE RERUN please", last, "U0HUMAN01")
    await store.end_run("seeded-run", "finished", last + 1)
    figure = {"text": "260", "step": 1, "line": "260", "call_id": None, "earlier": 0}
    await store.record_figures("seeded-run", [figure])
    await store.save_schedule(ScheduleRecord(
        id="every-minute", key=key, owner="U0HUMAN01", cron="* * * * *", zone="UTC",
        question="ANSWER THE RERUN please", created_at=last - 60,
    ))  # fmt: skip
    await store.claim_firing("every-minute", last, "earlier-replica", last)
    await store.end_firing("every-minute", last, "finished", "seeded-run")


async def test_the_channel_list_pauses_resumes_and_deletes(sandbox_root: Path, monkeypatch) -> None:
    world = fake_world("local", proposer, sandbox_root, monkeypatch, schedule_editors="U0EDITOR1")
    async with world as h, bot_process(h):
        store = await store_of(h)
        try:
            for sid, owner in (("mine", "U0HUMAN01"), ("theirs", "U0HUMAN02")):
                await store.save_schedule(ScheduleRecord(
                    id=sid, key=f"{h.slack.team_id}:{CHANNEL}:1700000000.00010{len(sid)}",
                    owner=owner, cron="0 9 * * 1", zone="Europe/Warsaw", question="Orders?",
                    created_at=1.0 if sid == "mine" else 2.0, failures=2,
                ))  # fmt: skip
            await store.save_schedule(ScheduleRecord(
                id="elsewhere", key=f"{h.slack.team_id}:C0OTHER01:1.0", owner="U0HUMAN01",
                cron="0 9 * * 1", zone="UTC", question="?", created_at=3.0,
            ))  # fmt: skip
            fired_at = time.time()  # this month, whenever the test runs
            await store.claim_firing("mine", fired_at, "r", fired_at)
            await store.end_firing("mine", fired_at, "finished", "run-x", 0.25)
            await h.slack.slash_command("/analyze", "schedules")
            listed = lambda: [  # noqa: E731
                m for m in h.slack.bot_messages(CHANNEL) if "Schedules in this channel" in str(m)
            ]
            await h.slack.wait_for(listed, 10)
            [message] = listed()
            shown = json.dumps(message["blocks"], ensure_ascii=False)
            ephemerals = len(h.slack.ephemerals)
            await h.slack.click_button(message, "schedule_pause:theirs")
            await h.slack.wait_for(lambda: len(h.slack.ephemerals) > ephemerals, 10)
            refused = h.slack.ephemerals[-1]["text"]
            await h.slack.click_button(message, "schedule_pause:mine")
            await h.slack.wait_for(lambda: "paused by" in json.dumps(listed()), 10)
            paused = await store.get_schedule("mine")
            [message] = listed()
            await h.slack.click_button(message, "schedule_resume:mine")
            await h.slack.wait_for(lambda: "paused by" not in json.dumps(listed()), 10)
            resumed = await store.get_schedule("mine")
            [message] = listed()
            await h.slack.click_button(message, "schedule_delete:theirs", user="U0EDITOR1")
            await h.slack.wait_for(lambda: "Schedules in this channel* (1)" in str(listed()), 10)
            left = [s.id for s in await store.list_schedules()]
        finally:
            await store.close()
    assert "Schedules in this channel* (2) · spent this month: $0.25" in shown
    assert "C0OTHER01" not in shown
    assert "At 09:00, only on Monday, Europe/Warsaw; next Mon" in shown
    assert "owner <@U0HUMAN01>" in shown and "last: finished" in shown
    assert "Only <@U0HUMAN02> or the schedule editors" in refused
    assert paused is not None and paused.state == "paused"
    assert resumed is not None and (resumed.state, resumed.failures) == ("active", 0)
    assert left == ["mine", "elsewhere"]


async def test_a_failed_firing_can_be_retried_once(sandbox_root: Path, monkeypatch) -> None:
    world = fake_world(
        "local", proposer, sandbox_root, monkeypatch, schedule_min_interval_s=3600,
        schedule_tick_s=0.1,
    )  # fmt: skip
    async with world as h, bot_process(h):
        thread = (await h.slack.post_user_message(CHANNEL, "a thread", mention=False))["ts"]
        h.model.fail_next(1, http_error(400))  # the firing's first model call
        store = await store_of(h)
        try:
            now = time.time()
            await store.save_schedule(ScheduleRecord(
                id="hourly", key=f"{h.slack.team_id}:{CHANNEL}:{thread}", owner="U0HUMAN01",
                cron="0 * * * *", zone="UTC", question="ANSWER THE RERUN please",
                created_at=now - 3601,
            ))  # fmt: skip
            await h.slack.wait_for(lambda: with_button(h, thread, "schedule_retry"), 30)
            [failed] = with_button(h, thread, "schedule_retry")
            await asyncio.gather(  # two people press it at once
                h.slack.click_button(failed, "schedule_retry", user="U0HUMAN02"),
                h.slack.click_button(failed, "schedule_retry", user="U0HUMAN01"),
            )
            await h.slack.wait_for(lambda: "There are 265 rows." in h.texts(thread), 30)
            async with asyncio.timeout(30):  # the retry's end, recorded after its answer
                while True:
                    firings = await store.firings("hourly")
                    if firings[0].outcome == "finished":
                        break
                    await asyncio.sleep(0.05)
            stored = await store.get_schedule("hourly")
        finally:
            await store.close()
    assert [f.outcome for f in firings] == ["finished", "failed"]
    assert firings[0].fire_at == firings[1].fire_at + 0.001  # the retry, once for two clicks
    assert "Retried by <@U0HUMAN0" in h.texts(thread)
    assert stored is not None and stored.failures == 0 and stored.run_now_at is None


async def test_a_channel_schedule_posts_each_firing_as_a_new_message(
    sandbox_root: Path, monkeypatch
) -> None:
    world = fake_world(
        "local", proposer, sandbox_root, monkeypatch, schedule_min_interval_s=3600,
        schedule_tick_s=0.1,
    )  # fmt: skip
    async with world as h, bot_process(h):
        thread = (await h.slack.post_user_message(CHANNEL, "a thread", mention=False))["ts"]
        store = await store_of(h)
        try:
            await store.save_schedule(ScheduleRecord(
                id="daily", key=f"{h.slack.team_id}:{CHANNEL}:{thread}", owner="U0HUMAN01",
                cron="0 * * * *", zone="UTC", question="ANSWER THE RERUN please",
                created_at=time.time() - 3601, post_as="channel",
            ))  # fmt: skip
            notes = lambda: [  # noqa: E731
                m
                for m in h.slack.bot_messages(CHANNEL)
                if "Scheduled run" in str(m.get("text")) and not m.get("thread_ts")
            ]
            await h.slack.wait_for(notes, 30)
            [note] = notes()
            await h.slack.wait_for(lambda: "There are 265 rows." in h.texts(note["ts"]), 30)
        finally:
            await store.close()
    assert "Scheduled run" not in h.texts(thread)  # the schedule's own thread stays quiet


async def test_a_late_firing_says_so_and_a_third_failure_pauses(
    sandbox_root: Path, monkeypatch
) -> None:
    world = fake_world(
        "local", proposer, sandbox_root, monkeypatch, schedule_min_interval_s=3600,
        schedule_tick_s=0.1, schedule_editors="U0EDITOR1",
    )  # fmt: skip
    async with world as h, bot_process(h):
        thread = (await h.slack.post_user_message(CHANNEL, "a thread", mention=False))["ts"]
        h.model.fail_next(1, http_error(400))
        store = await store_of(h)
        try:
            minute = (time.gmtime().tm_min - 10) % 60  # last due 10 minutes ago: late
            await store.save_schedule(ScheduleRecord(  # down for 3 hours, 2 failures so far
                id="hourly", key=f"{h.slack.team_id}:{CHANNEL}:{thread}", owner="U0HUMAN01",
                cron=f"{minute} * * * *", zone="UTC", question="ANSWER THE RERUN please",
                created_at=time.time() - 4 * 3600, failures=2,
            ))  # fmt: skip
            await h.slack.wait_for(lambda: "is paused after 3 failed" in h.texts(thread), 30)
            stored = await store.get_schedule("hourly")
            firings = await store.firings("hourly")
        finally:
            await store.close()
    said = h.texts(thread)
    assert "late: the bot was not running when it was due." in said
    assert "earlier firings did not run." in said and len(firings) == 1
    assert "<@U0HUMAN01>, <@U0EDITOR1> can resume it with `/analyze schedules`" in said
    assert stored is not None and stored.state == "paused"
    assert stored.paused_why == "3 failed firings in a row"


async def test_a_firing_in_a_repository_thread_reads_the_newest_commit(
    sandbox_root: Path, monkeypatch
) -> None:
    """/analyze's thread: the firing's sandbox is a fresh one, which fetches the repository
    again, so a file committed since the thread began is there."""
    repo = make_repo(sandbox_root / "srv", {"data.csv": b"a,b\n1,2\n"})
    url = "https://git.example.com/acme/data"

    def lister(req):  # each question: list the repository, then say what is there
        if not (results := req.tool_results()):
            return Reply([tool_use("list_files", {"path": "/buddy/data"})])
        return Reply([text("found: " + results[-1].text)])

    world = fake_world(
        "buddy", lister, sandbox_root, monkeypatch, schedule_min_interval_s=3600,
        schedule_tick_s=0.1,
    )  # fmt: skip
    async with world as h, bot_process(h):
        assert h.buddy is not None
        h.buddy.repos[url] = repo
        await h.slack.wait_for_ack(await h.slack.slash_command("/analyze", url))
        started = lambda: [  # noqa: E731
            m for m in h.slack.bot_messages(CHANNEL) if "asked me to analyze" in str(m.get("text"))
        ]
        await h.slack.wait_for(started, 30)
        thread = started()[0]["ts"]
        await h.slack.wait_for(lambda: "found:" in h.texts(thread), 60)
        commit(repo, "later.csv", b"c\n3\n")
        store = await store_of(h)
        try:
            await store.save_schedule(ScheduleRecord(
                id="hourly", key=f"{h.slack.team_id}:{CHANNEL}:{thread}", owner="U0HUMAN01",
                cron="0 * * * *", zone="UTC", question="What is in the repository?",
                created_at=time.time() - 3601,
            ))  # fmt: skip
            await h.slack.wait_for(lambda: "later.csv" in h.texts(thread), 60)
        finally:
            await store.close()


def commit(bare: Path, name: str, data: bytes) -> None:
    """A new commit on the bare repository's main branch, adding `name`."""
    work = bare.parent / "work"
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], env=env, check=True)
    (work / name).write_bytes(data)
    for args in (["add", name], ["commit", "-qm", f"add {name}"], ["push", "-q"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)
