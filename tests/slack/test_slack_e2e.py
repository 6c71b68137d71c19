"""The Slack app end to end, on both sandbox backends: a person's view of the thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.anthropic import Reply, http_error, text, tool_use
from tests.scripts import population_analyst
from tests.slack_harness import CHANNEL, REAL_TIERS, running_bot
from tests.support import POPULATION_CSV

CLASSIC = {"slack_ui": "classic"}  # for tests of the classic rendering
QUESTION = "which three countries grew most from 2000 to 2020? exclude aggregates"


async def mention_with_csv(h, question: str = QUESTION) -> str:
    csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
    message = await h.slack.post_user_message(CHANNEL, question, files=[csv], mention=True)
    return message["ts"]


async def test_mention_with_csv_answers_with_progress_and_report(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    """The classic UI at Slack's own rate tiers (the fake's and the bot's pacing at 1x)."""
    async with running_bot(
        backend, population_analyst, sandbox_root, monkeypatch, REAL_TIERS, **CLASSIC
    ) as h:
        thread = await mention_with_csv(h)
        await h.wait_for_text(thread, "5 turns")
        # Slack shares an upload a moment after it completes: wait for it in the thread
        shared = lambda: [u for u in h.slack.uploads.values() if u.shared_ts]  # noqa: E731
        await h.slack.wait_for(lambda: any(u.filename == "report.md" for u in shared()))
        texts = h.texts(thread)
        calls = h.slack.method_counts()

    assert ("C0CHAN001", thread, "eyes") in h.slack.reactions
    # The file's data card replaces a plain "got it": its shape, columns and aggregate rows.
    card = next(t for t in texts.splitlines() if "*population_2000_2010_2020.csv*" in t)
    assert "CSV · 795 rows × 4 columns" in card
    assert "`Country Name` text · `Country Code` text · `Year` integer · `Value` integer" in texts
    assert "aggregate rows in `Country Name` (World" in texts
    for name, number in (
        ("India", "1,402,617,695"),
        ("China", "1,411,100,000"),
        ("Nigeria", "213,996,181"),
    ):
        assert name in texts and number in texts
    # One message per tool call, each edited in place when it finished.
    steps = [m for m in h.bot_messages(thread) if "Step" in (m.get("text") or "")]
    assert len(steps) == 4
    assert all(m.history for m in steps)
    assert "import polars" in texts and "ModuleNotFoundError" in texts
    report = next(u for u in h.slack.uploads.values() if u.filename == "report.md")
    assert b"1,057,922,733" in report.content and report.thread_ts == thread
    share = h.slack.find_message(CHANNEL, report.shared_ts)
    assert share is not None and share["thread_ts"] == thread
    assert calls["auth.test"] >= 1 and calls["chat.postMessage"] >= 6
    assert h.sandboxes_alive() == 1  # kept at shutdown, for the next start
    # The file came through Slack's CDN redirect, which never saw the bot token.
    assert h.slack.cdn is not None and h.slack.cdn.requests
    assert h.slack.cdn.tokens_seen == []


def answers(h, thread: str) -> list[str]:
    texts = [m.get("text") or "" for m in h.bot_messages(thread)]
    return [t for t in texts if t.startswith("files:")]


async def test_follow_up_idle_teardown_and_resume(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    def script(req):
        if not req.tool_results():
            code = "import os; print(sorted(os.listdir('/buddy/work/uploads')))"
            return Reply([tool_use("run_code", {"language": "python", "code": code})])
        return Reply(
            [
                text(
                    "files: "
                    + req.tool_results()[-1].text.split("--- stdout ---\n")[1].split("\n")[0]
                )
            ]
        )

    async with running_bot(
        backend, script, sandbox_root, monkeypatch, session_idle_timeout=1.5
    ) as h:
        thread = await mention_with_csv(h, "what files do you have?")
        await h.wait_for_text(thread, "files: ['population_2000_2010_2020.csv']")
        alive_first = h.sandboxes_alive()
        # A follow-up in the thread, no mention needed, same sandbox.
        await h.slack.post_user_message(CHANNEL, "and now?", thread_ts=thread)
        await h.slack.wait_for(lambda: len(answers(h, thread)) == 2)
        assert h.sandboxes_alive() == alive_first == 1
        # Quiet: the sandbox goes, a note says so.
        await h.wait_for_text(thread, "sandbox was shut down", timeout=15)
        await h.slack.wait_for(lambda: h.sandboxes_alive() == 0)
        # A later message: a fresh sandbox with the file in place again.
        await h.slack.post_user_message(CHANNEL, "still there?", thread_ts=thread)
        await h.slack.wait_for(lambda: len(answers(h, thread)) == 3, 20)
        assert answers(h, thread)[-1] == "files: ['population_2000_2010_2020.csv']"
        assert h.sandboxes_alive() == 1
    # The model kept the conversation across the teardown.
    assert len([m for m in h.model.requests[-1].messages if m["role"] == "user"]) >= 5


async def test_stop_button_cancels_the_run(backend: str, sandbox_root: Path, monkeypatch) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 60"})])
        return Reply([text("should not get here")])

    async with running_bot(backend, script, sandbox_root, monkeypatch, **CLASSIC) as h:
        message = await h.slack.post_user_message(CHANNEL, "wait a minute", mention=True)
        thread = message["ts"]
        await h.wait_for_text(thread, "Step 1")
        status = next(m for m in h.bot_messages(thread) if "Working on it" in (m.get("text") or ""))
        await h.slack.click_button(status, "stop_run")
        await h.wait_for_text(thread, "Stopped by <@U0HUMAN01>")
    assert "should not get here" not in h.texts(thread)
    assert len(h.model.requests) == 1


async def test_redelivery_unrelated_thread_non_data_file_and_two_threads(
    sandbox_root: Path, monkeypatch
) -> None:
    def script(req):
        question = req.messages[0]["content"][-1]["text"]
        return Reply([text(f"answer to: {question}")])

    async with running_bot("local", script, sandbox_root, monkeypatch) as h:
        # Two threads at once, answers not mixed.
        first = await h.slack.post_user_message(CHANNEL, "alpha question", mention=True)
        second = await h.slack.post_user_message(CHANNEL, "beta question", mention=True)
        await h.wait_for_text(first["ts"], "answer to: alpha question")
        await h.wait_for_text(second["ts"], "answer to: beta question")
        assert "beta" not in h.texts(first["ts"]) and "alpha" not in h.texts(second["ts"])
        # The same event delivered again is answered once: a later question in the thread
        # ends a second run, and no third (nor a joined "gamma") was made.
        event = {"type": "app_mention", "user": "U0HUMAN01", "text": "<@U0BOT0001> gamma",
                 "ts": "1767225600.000900", "channel": CHANNEL, "team": "T0FAKE001"}  # fmt: skip
        for attempt in range(2):
            envelope = await h.slack.push_event(event, event_id="Ev0GAMMA", retry_attempt=attempt)
            await h.slack.wait_for_ack(envelope)
        await h.wait_for_text("1767225600.000900", "answer to: gamma")
        await h.slack.post_user_message(CHANNEL, "delta", thread_ts="1767225600.000900")
        runs = await h.wait_for_runs("1767225600.000900", 2)
        assert runs == [("gamma", "finished"), ("delta", "finished")]
        # A message in a thread the bot has no session for is ignored.
        lone = await h.slack.post_user_message(CHANNEL, "just chatting")
        await h.slack.post_user_message(CHANNEL, "a reply", thread_ts=lone["ts"])
        for envelope in list(h.slack.envelopes):  # each listener has started
            await h.slack.wait_for_ack(envelope["envelope_id"])
        # A file that is not data gets a clear reply and is skipped; once that run is over,
        # the messages before it have long been dealt with.
        image = h.slack.add_file("photo.png", b"\x89PNG...", mimetype="image/png", filetype="png")
        await h.slack.post_user_message(CHANNEL, "look", thread_ts=first["ts"], files=[image])
        await h.wait_for_text(first["ts"], "Skipped photo.png")
        assert [q for q, _ in await h.wait_for_runs(first["ts"], 2)] == ["alpha question", "look"]
    assert h.bot_messages(lone["ts"]) == [] and h.runs(lone["ts"]) == []
    assert not any(m.get("reactions") for m in h.slack.thread(CHANNEL, lone["ts"]))


async def test_analyze_command(sandbox_root: Path, monkeypatch, tmp_path: Path) -> None:
    import subprocess

    repo = sandbox_root / "repo"
    repo.mkdir()
    (repo / "data.csv").write_text("a,b\n1,2\n")
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True)

    def script(req):
        if req.turn == 0:
            return Reply([tool_use("list_files", {"path": "/buddy/data"})])
        return Reply([text("found: " + req.tool_results()[-1].text)])

    # A public address: Buddy fetches it (a name is left for Buddy to resolve).
    url = "https://140.82.112.3/acme/data"
    async with running_bot("buddy", script, sandbox_root, monkeypatch) as h:
        h.buddy.repos[url] = repo
        envelope = await h.slack.slash_command("/analyze", "ftp://nope")
        ack = await h.slack.wait_for_ack(envelope)
        assert "https" in str(ack.get("payload"))
        envelope = await h.slack.slash_command("/analyze", url)
        await h.slack.wait_for_ack(envelope)
        await h.slack.wait_for(
            lambda: any(
                "asked me to analyze" in (m.get("text") or "")
                for m in h.slack.messages.get(CHANNEL, [])
            )
        )
        parent = next(
            m for m in h.slack.messages[CHANNEL] if "asked me to analyze" in (m.get("text") or "")
        )
        await h.wait_for_text(parent["ts"], "data.csv")
    assert "<@U0HUMAN01>" in parent["text"] and url in parent["text"]
    assert "Explore the data files" in h.model.requests[0].messages[0]["content"][-1]["text"]


async def test_shutdown_interrupts_long_runs_and_keeps_sandboxes(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    def script(req):
        return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 60"})])

    async with running_bot(backend, script, sandbox_root, monkeypatch, shutdown_grace_s=0.5) as h:
        message = await h.slack.post_user_message(CHANNEL, "long job", mention=True)
        await h.wait_for_text(message["ts"], "Step 1")
        assert h.sandboxes_alive() == 1
        # Leaving the block stops the app, as SIGTERM does.
    assert "restarting, so this run was interrupted" in h.texts(message["ts"])
    assert h.sandboxes_alive() == 1  # kept for the next start


async def test_rate_limits_model_errors_and_joined_questions(
    sandbox_root: Path, monkeypatch
) -> None:
    gate = asyncio.Event()

    async def script(req):
        question = req.messages[-1]["content"][-1]["text"]
        if question == "first":
            await gate.wait()  # hold the run while more questions arrive
        return Reply([text(f"answer to: {question}")])

    async with running_bot("local", script, sandbox_root, monkeypatch, **CLASSIC) as h:
        h.slack.fail_next("chat.postMessage", 2)  # 429 with Retry-After: 1, twice
        message = await h.slack.post_user_message(CHANNEL, "first", mention=True)
        thread = message["ts"]
        await h.wait_for_text(thread, "Working on it")
        for follow_up in ("second", "third"):
            await h.slack.post_user_message(CHANNEL, follow_up, thread_ts=thread)
        await h.slack.wait_for(lambda: h.queued(thread) == ["second", "third"])
        gate.set()
        await h.wait_for_text(thread, "answer to: second\n\nthird")  # joined into one turn
        assert "answer to: first" in h.texts(thread)
        assert len(h.model.requests) == 2
        # The model API refusing the key: one clear message, the bot carries on.
        h.model.fail_next(1, http_error(401, "authentication_error"))
        await h.slack.post_user_message(CHANNEL, "again", thread_ts=thread)
        await h.wait_for_text(thread, "rejected the API key")
        await h.slack.post_user_message(CHANNEL, "once more", thread_ts=thread)
        await h.wait_for_text(thread, "answer to: once more")
    statuses = [c.status for c in h.slack.calls_to("chat.postMessage")]
    assert statuses[:2] == [429, 429] and all(s == 200 for s in statuses[2:])
