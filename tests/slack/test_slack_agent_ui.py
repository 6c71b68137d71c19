"""The agent style in Slack (SLACK_UI=agent) end to end: the thread's status at once, one
streamed message per run (a task per file and per tool call, Stop, the answer, feedback),
and where streaming ends or is missing."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from pathlib import Path

from slack_sdk.models.messages.chunk import Chunk, TaskUpdateChunk

from bot.slack.view.assistant_threads import STATUS
from bot.store.sqlite import SqliteStore
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.scripts import population_analyst
from tests.slack.test_slack_e2e import mention_with_csv
from tests.slack_harness import CHANNEL, REAL_TIERS, running_bot

SESSIONS = "agents.sessions.setStatus"  # a workspace without sessions: one refusal
NUMBERS = ("1,402,617,695", "1,411,100,000", "213,996,181")


def streamed(h, thread: str) -> list:
    return [
        h.slack.find_message(s.channel, s.ts)
        for s in h.slack.streams.values()
        if h.slack.find_message(s.channel, s.ts).get("thread_ts") == thread
    ]


def visible(h, thread: str) -> list:
    """The bot's messages in the thread, not counting shared files."""
    return [m for m in h.bot_messages(thread) if not m.get("files")]


def slowly(model, delay_s: float):
    """The same replies, each `delay_s` late (a model that thinks)."""
    return lambda req: dataclasses.replace(model(req), delay_s=delay_s)


def sdk_shaped(slack) -> list:
    """Every chunk the bot streamed, each as slack_sdk's own model of it would send it: a
    task_update missing its id, title or status cannot be built (TypeError)."""
    chunks = [
        chunk
        for method in ("chat.startStream", "chat.appendStream", "chat.stopStream")
        for call in slack.calls_to(method)
        for chunk in call.args.get("chunks") or []
    ]
    for chunk in chunks:
        fields = {k: v for k, v in chunk.items() if k != "type"}
        model = TaskUpdateChunk(**fields) if chunk["type"] == "task_update" else Chunk.parse(chunk)
        assert model is not None and model.to_dict() == chunk, chunk
    return chunks


async def feedback_on(h, thread: str) -> list:
    """The thread's recorded feedback, once there is some (or after 10 s)."""
    store = SqliteStore(h.settings.store_path)
    await store.open()
    try:
        for _ in range(100):
            if ratings := await store.feedback(f"T0FAKE001:{CHANNEL}:{thread}"):
                return ratings
            await asyncio.sleep(0.1)
        return []
    finally:
        await store.close()


async def test_one_streamed_message_with_the_file_the_steps_and_the_answer(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    """The default UI at Slack's own rate tiers (the fake's and the bot's pacing at 1x)."""
    async with running_bot(backend, population_analyst, sandbox_root, monkeypatch, REAL_TIERS) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        await h.slack.wait_for(lambda: h.slack.uploads)
        [answer] = streamed(h, thread)
        await h.slack.click_button(answer, "feedback", user="U0HUMAN02", value="bad")
        ratings = await feedback_on(h, thread)

    chunks = sdk_shaped(h.slack)
    assert sum(c["type"] == "task_update" for c in chunks) >= 5  # the file, each step
    assert not [c for c in h.slack.calls if c.error and c.method != SESSIONS]
    first = h.slack.statuses[0]
    assert (first.status, first.loading_messages) == (STATUS, (f"Reading {CSV}…",))
    assert h.slack.thread_status(CHANNEL, thread) == ""  # the streamed reply cleared it
    assert not h.slack.reactions  # the status is the sign, not :eyes:
    # the answer, then its table as a table (a data_table with numbers as numbers)
    [shown, data] = visible(h, thread)
    assert shown["ts"] == answer["ts"]
    [table] = [b for b in data["blocks"] if b["type"] == "data_table"]
    assert all(n in str(table) for n in NUMBERS) and "raw_number" in str(table)
    stream = h.slack.streams[answer["ts"]]
    assert stream.stopped and stream.recipient == ("U0HUMAN01", "T0FAKE001")
    plan, stop, markdown, footer, work, feedback = answer["blocks"]
    file_task, *steps = plan["tasks"]
    assert file_task["title"] == f"Read {CSV}" and "144 aggregate rows" in file_task["output"]
    assert len(steps) == 4 and {t["status"] for t in steps} == {"complete", "error"}
    assert any("import polars" in t.get("details", "") for t in steps)
    assert any("ModuleNotFoundError" in t.get("output", "") for t in steps)
    assert stop["elements"][0]["action_id"] == "stop_run"
    assert "Table 1 below" in markdown["text"] and "5 turns" in str(footer)
    assert feedback["type"] == "context_actions"
    assert [e["action_id"] for e in work["elements"]] == ["show_work", "notebook"]
    assert [(r.user, r.value) for r in ratings] == [("U0HUMAN02", "bad")]


CSV = "population_2000_2010_2020.csv"


async def test_a_slow_run_shows_each_step_as_it_goes(sandbox_root: Path, monkeypatch) -> None:
    model = slowly(population_analyst, 1.2)
    async with running_bot("local", model, sandbox_root, monkeypatch, slack_ui="assistant") as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: h.slack.calls_to("chat.appendStream"), 20)
        [live] = streamed(h, thread)
        stream = h.slack.streams[live["ts"]]
        tasks, answer = len(stream.tasks), stream.text
        await h.wait_for_text(thread, "5 turns")

    assert tasks >= 2 and answer == ""  # steps shown while the run went, before any answer
    appends = h.slack.calls_to("chat.appendStream")
    assert all(c.error is None for c in appends)
    gaps = [b.at - a.at for a, b in itertools.pairwise(appends)]
    assert all(gap >= 1.9 for gap in gaps), gaps  # coalesced: one call every 2 s at most


def long_step(req: ModelRequest) -> Reply:
    if req.turn == 0:
        code = "import time\ntime.sleep(3)\nprint('slept')"
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    return Reply([text("Done sleeping.")])


async def test_a_long_steps_end_is_streamed_whole(sandbox_root: Path, monkeypatch) -> None:
    """A step outlasting a flush ends in a later call than it began; that task_update still
    carries its title, so Slack takes it, and the stop with the footer and feedback."""
    async with running_bot(
        "local", long_step, sandbox_root, monkeypatch, slack_ui="assistant"
    ) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "sleep?", mention=True))["ts"]
        await h.wait_for_text(thread, "2 turns")

    [answer] = visible(h, thread)
    stream = h.slack.streams[answer["ts"]]
    errors = [(c.method, c.error) for c in h.slack.calls if c.error]
    assert stream.stopped and errors == [(SESSIONS, "feature_disabled")]  # learnt once
    updates = [c for c in sdk_shaped(h.slack) if c["type"] == "task_update"]
    assert [u["status"] for u in updates] == ["in_progress", "complete"]
    [task] = stream.tasks.values()
    assert task["title"] == "Step 1 · python: import time" and "slept" in task["output"]
    assert "Done sleeping." in answer["text"] and "context_actions" in str(answer["blocks"])


async def test_stop_in_the_streamed_message(sandbox_root: Path, monkeypatch) -> None:
    model = slowly(population_analyst, 1.0)
    async with running_bot("local", model, sandbox_root, monkeypatch, slack_ui="assistant") as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: streamed(h, thread), 20)
        [live] = streamed(h, thread)
        await h.slack.click_button(live, "stop_run", user="U0HUMAN02")  # not the asker's
        await h.slack.wait_for(lambda: h.slack.ephemerals)
        assert h.runs(thread)[0][1] is None  # still going
        await h.slack.click_button(live, "stop_run")
        await h.wait_for_text(thread, "Stopped by <@U0HUMAN01>")
        await h.slack.click_button(live, "stop_run")
        await h.slack.wait_for(lambda: len(h.slack.ephemerals) == 2)

    assert h.slack.streams[live["ts"]].stopped
    refused, ended = h.slack.ephemerals
    assert refused["user"] == "U0HUMAN02" and "Only <@U0HUMAN01>" in refused["text"]
    assert ended["user"] == "U0HUMAN01" and "already ended" in ended["text"]


async def test_slacks_own_stop_stops_the_run(sandbox_root: Path, monkeypatch, caplog) -> None:
    """A person pressing Slack's stop on the streamed message wants the run stopped: it
    ends as stopped, the model is asked no more, and the thread says so, without a
    traceback or a warning."""
    model = slowly(population_analyst, 1.0)
    async with running_bot("local", model, sandbox_root, monkeypatch, slack_ui="assistant") as h:
        thread = await mention_with_csv(h)
        await h.slack.wait_for(lambda: streamed(h, thread), 20)
        [live] = streamed(h, thread)
        h.slack.press_stop(CHANNEL, live["ts"], user="U0HUMAN02")
        [(_, outcome)] = await h.wait_for_runs(thread, 1)
        await h.wait_for_text(thread, "Stopped")
        asked = len(h.model.requests)

    assert outcome == "stopped" and asked <= 2
    refused = [c.error for c in h.slack.calls if c.method.endswith("Stream") and c.error]
    assert set(refused) <= {"stopped_by_user"} and len(refused) <= 1
    assert h.slack.streams[live["ts"]].stopped_by_user == "U0HUMAN02"
    *_, note = visible(h, thread)  # the stream is ended: the note comes after it
    assert note["ts"] != live["ts"] and note["text"].startswith(":octagonal_sign: Stopped.")
    mine = [r for r in caplog.records if r.name.startswith("bot") and r.levelno >= logging.WARNING]
    assert not mine, caplog.text  # (the fake model may log the cancelled request)


async def test_stream_expiry_mid_run_loses_no_text(sandbox_root: Path, monkeypatch) -> None:
    options = {"stream_lifetime_s": 0.0}
    model = slowly(population_analyst, 0.3)
    async with running_bot(
        "local", model, sandbox_root, monkeypatch, options, slack_ui="assistant"
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        await h.slack.wait_for(lambda: "data_table" in str(visible(h, thread)))
        texts = h.texts(thread)

    ended = [c.error for c in h.slack.calls if c.method.startswith("chat.") and c.error]
    assert set(ended) == {"message_not_in_streaming_state"}
    assert all(n in texts for n in NUMBERS)
    answer, data = visible(h, thread)[-2:]  # the answer's end, then its table
    assert "context_actions" in str(answer["blocks"]) and "data_table" in str(data["blocks"])


def long_list(req: ModelRequest) -> Reply:
    rows = "\n".join(f"- row {i:04d}: {i * 7919 % 100_000:>8}" for i in range(900))
    return Reply([text(f"Here is every row.\n\n{rows}\n\nThe end.")])


async def test_an_answer_past_12000_characters_continues_readably(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(
        "local", long_list, sandbox_root, monkeypatch, slack_ui="assistant"
    ) as h:
        thread = (await h.slack.post_user_message(CHANNEL, "all rows?", mention=True))["ts"]
        await h.wait_for_text(thread, "The end.")
        await h.slack.wait_for(lambda: "context_actions" in str(visible(h, thread)[-1]))
        messages = visible(h, thread)

    parts = [b["text"] for m in messages for b in m["blocks"] if b["type"] == "markdown"]
    assert len(parts) >= 2 and all(len(p) <= 12_000 for p in parts)
    body = "\n".join(parts)
    assert all(f"- row {i:04d}:" in body for i in range(900))
    assert "context_actions" in str(messages[-1]["blocks"])


async def test_a_workspace_refusing_streams_gets_the_classic_view(
    sandbox_root: Path, monkeypatch
) -> None:
    options = {"ai_refusal": "feature_not_enabled"}
    async with running_bot(
        "local", population_analyst, sandbox_root, monkeypatch, options, slack_ui="assistant"
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        steps = [m for m in h.bot_messages(thread) if "Step" in (m.get("text") or "")]
        texts = h.texts(thread)

    assert len(steps) == 4 and all(n in texts for n in NUMBERS)
    assert not h.slack.streams
    assert len(h.slack.calls_to("assistant.threads.setStatus")) == 1  # refused, remembered
    assert [r[2] for r in h.slack.reactions] == ["eyes"]


async def test_a_direct_message_gets_prompts_a_title_and_a_stream(
    sandbox_root: Path, monkeypatch
) -> None:
    dm = "D0DM00001"
    answer = lambda req: Reply([text("About 8 billion.")])  # noqa: E731
    root = ""

    def dm_replies() -> list:
        return [m for m in h.slack.thread(dm, root) if m.get("bot_id")]

    async with running_bot("local", answer, sandbox_root, monkeypatch, slack_ui="assistant") as h:
        await h.slack.push_event(
            {"type": "app_home_opened", "user": "U0HUMAN01", "channel": dm, "tab": "messages"}
        )
        await h.slack.wait_for(lambda: h.slack.prompts)
        question = "How many people live on Earth?\nRoughly, please."
        root = (await h.slack.post_user_message(dm, question))["ts"]
        await h.slack.wait_for(lambda: any("8 billion" in m.get("text", "") for m in dm_replies()))

    [prompts] = h.slack.prompts
    assert prompts["channel"] == dm and not prompts["thread_ts"] and len(prompts["prompts"]) == 3
    assert h.slack.titles == {(dm, root): "How many people live on Earth? Roughly, please."}
    assert h.slack.status_history(dm, root)[0] == STATUS


async def test_a_question_with_tools_is_answered_under_enforced_rate_tiers(
    sandbox_root: Path, monkeypatch
) -> None:
    """Eight threads at once in one channel, Slack's tiers ten times faster on both sides:
    every answer arrives once and whole (in its stream, or in a message of its own for a
    run that ended before Slack let its stream start), and a 429 (injected on a stream's
    start) is waited out."""
    quick = slowly(lambda req: _one_step(req), 0.0)
    options = {"rate_limits": 10.0}
    async with running_bot(
        "local",
        quick,
        sandbox_root,
        monkeypatch,
        options,
        slack_ui="assistant",
        slack_rate_scale=10,
    ) as h:
        h.slack.fail_next("chat.startStream", status=429, retry_after=1)
        threads = [
            (await h.slack.post_user_message(CHANNEL, f"sum {i}?", mention=True))["ts"]
            for i in range(8)
        ]
        for thread in threads:
            await h.wait_for_text(thread, "The sum is 6.", timeout=60)

    starts = h.slack.calls_to("chat.startStream")
    assert starts[0].status == 429 and any(c.status == 200 for c in starts)
    # paced: the injected 429, and at most one more when a busy machine bunches two calls
    # on the wire (unpaced, the tiers answer several)
    assert len(h.slack.rate_limited()) <= 2
    assert {c.method for c in h.slack.rate_limited()} == {"chat.startStream"}
    answers = [[m for m in visible(h, t) if "The sum is 6." in m["text"]] for t in threads]
    assert all(len(a) == 1 for a in answers)
    assert all("context_actions" in str(visible(h, t)[-1]["blocks"]) for t in threads)
    assert not any(":warning:" in h.texts(t) for t in threads)


def _one_step(req: ModelRequest) -> Reply:
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "python", "code": "print(1+2+3)"})])
    return Reply([text("The sum is 6.")])
