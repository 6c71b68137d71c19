"""Restarts, deploys and crashes: nothing a user cares about is lost, nothing leaks."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack_harness import CHANNEL, Harness, bot_process, fake_world
from tests.support import POPULATION_CSV, settings_env

LIST_UPLOADS = "import os; print(sorted(os.listdir('/buddy/work/uploads')))"
SLOW = "sleep 30.125"  # a command no other test runs: its process is found by it


def last_question(req: ModelRequest) -> str:
    for message in reversed(req.messages):
        if message["role"] == "user":
            texts = [b["text"] for b in message["content"] if b.get("type") == "text"]
            if texts:
                return texts[-1]
    return ""


def script(req: ModelRequest) -> Reply:
    """'slow': a long command. Anything else: list the uploads and answer with them."""
    results = req.tool_results()
    if results and "--- stdout ---" in results[-1].text:
        listing = results[-1].text.split("--- stdout ---\n")[1].split("\n")[0]
        return Reply([text(f"files: {listing} (turns so far: {req.turn})")])
    code = SLOW if last_question(req) == "slow" else LIST_UPLOADS
    return Reply(
        [tool_use("run_code", {"language": "bash" if code == SLOW else "python", "code": code})]
    )


def answers(h: Harness, thread: str) -> list[str]:
    return [
        t for t in (m.get("text") or "" for m in h.bot_messages(thread)) if t.startswith("files:")
    ]


async def mention_with_csv(h: Harness, question: str) -> str:
    csv = h.slack.add_file(POPULATION_CSV.name, POPULATION_CSV.read_bytes())
    message = await h.slack.post_user_message(CHANNEL, question, files=[csv], mention=True)
    return message["ts"]


def sandboxes_made(h: Harness) -> int:
    if h.buddy is not None:
        return len(h.buddy.requests_to("POST", r"/sandboxes$"))
    return h.sandboxes_alive()  # local folders are only removed on destroy


async def test_restart_with_idle_sessions_reuses_their_sandboxes(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world(backend, script, sandbox_root, monkeypatch) as h:
        async with bot_process(h):
            thread = await mention_with_csv(h, "what files?")
            await h.slack.wait_for(lambda: len(answers(h, thread)) == 1, 20)
        assert h.sandboxes_alive() == 1  # a deploy keeps it
        async with bot_process(h):
            await h.slack.post_user_message(CHANNEL, "and now?", thread_ts=thread)
            await h.slack.wait_for(lambda: len(answers(h, thread)) == 2, 20)
        assert sandboxes_made(h) == 1  # reused, not recreated
        assert answers(h, thread)[-1].startswith("files: ['population_2000_2010_2020.csv']")
        # The second question was answered with the first conversation in the history.
        assert "(turns so far: 3)" in answers(h, thread)[-1]


async def test_restart_onto_a_sandbox_buddy_stopped_starts_it_again(
    sandbox_root: Path, monkeypatch
) -> None:
    """Buddy stopped the sandbox while the bot was down: the new process starts the same
    one again (files kept) instead of making a new one and fetching the files again."""
    async with fake_world("buddy", script, sandbox_root, monkeypatch) as h:
        assert h.buddy is not None
        async with bot_process(h):
            thread = await mention_with_csv(h, "what files?")
            await h.slack.wait_for(lambda: len(answers(h, thread)) == 1, 20)
        (sandbox,) = h.buddy.sandboxes.values()
        h.buddy.inactivity_timeout_s = 0.3  # Buddy's inactivity timeout fires meanwhile
        await h.slack.wait_for(lambda: sandbox.status == "STOPPED", 10)
        h.buddy.inactivity_timeout_s = None
        downloads = len(h.slack.downloads)
        async with bot_process(h):
            await h.slack.post_user_message(CHANNEL, "and now?", thread_ts=thread)
            await h.slack.wait_for(lambda: len(answers(h, thread)) == 2, 20)
        assert sandboxes_made(h) == 1  # started again, not recreated
        assert len(h.buddy.requests_to("POST", r"/start$")) == 1
        assert answers(h, thread)[-1].startswith("files: ['population_2000_2010_2020.csv']")
        assert len(h.slack.downloads) == downloads == 1  # the CSV was not fetched again


async def test_sigterm_lets_a_short_run_finish(sandbox_root: Path, monkeypatch) -> None:
    def quick(req: ModelRequest) -> Reply:
        if not req.tool_results():
            return Reply([tool_use("run_code", {"language": "bash", "code": "sleep 1; echo done"})])
        return Reply([text("finished in time")])

    async with fake_world("local", quick, sandbox_root, monkeypatch, shutdown_grace_s=10) as h:
        async with bot_process(h):
            message = await h.slack.post_user_message(CHANNEL, "go", mention=True)
            await h.wait_for_text(message["ts"], "Step 1")
        # The app was told to stop while the command ran; it finished the turn first.
        assert "finished in time" in h.texts(message["ts"])
        assert "interrupted" not in h.texts(message["ts"])


def _sleeping() -> bool:
    """Whether the slow question's `sleep` is running on this host."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if (
                Path(f"/proc/{pid}/cmdline").read_bytes()
                == SLOW.replace(" ", "\0").encode() + b"\0"
            ):
                return True
        except OSError:
            continue
    return False


async def test_crash_mid_run_then_restart(backend: str, sandbox_root: Path, monkeypatch) -> None:
    async with fake_world(backend, script, sandbox_root, monkeypatch) as h:
        env = settings_env(h.settings)
        connections = h.slack.connections
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", env=env, cwd=sandbox_root,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            await h.slack.wait_for(lambda: h.slack.connections > connections, 30)
            thread = await mention_with_csv(h, "slow")
            await h.wait_for_text(thread, "Step 1", timeout=30)
        finally:
            proc.send_signal(signal.SIGKILL)  # a crash: no clean-up at all
            await proc.wait()
        async with bot_process(h, orphan_cleanup=True, orphan_min_age_s=0):
            if backend == "local":  # no command of the dead bot runs on (Buddy's sandbox does)
                await h.slack.wait_for(lambda: not _sleeping(), 5)
            await h.wait_for_text(thread, "The bot restarted while working on this thread")
            await h.slack.post_user_message(CHANNEL, "continue", thread_ts=thread)
            await h.slack.wait_for(lambda: len(answers(h, thread)) == 1, 30)
            assert h.sandboxes_alive() == 1  # the thread's own; nothing leaked
        assert answers(h, thread)[0].startswith("files: ['population_2000_2010_2020.csv']")
        assert "Traceback" not in h.texts(thread)


async def test_sessions_command_lists_and_exports_the_audit(
    sandbox_root: Path, monkeypatch
) -> None:
    async with fake_world("local", script, sandbox_root, monkeypatch) as h:
        async with bot_process(h):
            thread = await mention_with_csv(h, "what files?")
            await h.slack.wait_for(lambda: len(answers(h, thread)) == 1, 20)
        env = settings_env(h.settings)
        listed, exported = await asyncio.gather(  # both only read the store
            _run_bot(env, sandbox_root, "sessions"),
            _run_bot(env, sandbox_root, "sessions", "export", thread),
        )
    assert f"T0FAKE001:{CHANNEL}:{thread}" in listed and "active" in listed and "$" in listed
    *records, conversation = [json.loads(line) for line in exported.splitlines()]
    records = [r for r in records if "run" not in r]  # the runs, with their figures
    assert [r["tool"] for r in records] == ["run_code"]
    assert records[0]["code"] == LIST_UPLOADS and records[0]["status"] == "ok"
    assert "what files?" in json.dumps(conversation["history"][0])


async def _run_bot(env: dict[str, str], cwd: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()
