"""End to end: a Slack thread resumed on a Buddy sandbox that Buddy stopped for inactivity.

The real bot process against fake Slack, model and Buddy servers: question 1 has the model
write /buddy/work/out/x.txt; the thread goes quiet and the fake Buddy stops the sandbox
(its inactivity timeout, 1 s here); question 2 in the same thread has the bot start that
sandbox again and the model read x.txt back. `python -m tests.slack.test_slack_stopped_sandbox
PATH` runs the same thread and writes its transcript to PATH.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.sessions.sandbox_changes import STOPPED
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.fakes.buddy import RecordedRequest
from tests.fakes.buddy.state import FakeSandbox
from tests.slack_harness import CHANNEL, Harness, running_bot

IDLE_S = 1.0
ASK_WRITE = "Please write a short note to /buddy/work/out/x.txt and remember its length."
ASK_READ = "What does x.txt say now? And do you still have its length?"
NOTE = "Q1 results: 796 rows, 144 of them aggregates."
WRITE = f"note = {NOTE!r}\nopen('/buddy/work/out/x.txt', 'w').write(note + '\\n')\nprint(len(note))"
READ = "print(open('/buddy/work/out/x.txt').read().strip())\nprint('note' in globals())"


def question(req: ModelRequest) -> str:
    for message in reversed(req.messages):
        texts = [b.get("text", "") for b in message["content"] if b.get("type") == "text"]
        if message["role"] == "user" and texts:
            return texts[-1]
    return ""


def stdout_of(req: ModelRequest) -> list[str]:
    return req.tool_results()[-1].text.split("--- stdout ---\n")[1].split("\n")


def script(req: ModelRequest) -> Reply:
    """Question 1: write x.txt (and keep its length in a variable). Question 2: read it
    back and check the variable."""
    writing = ASK_WRITE in question(req)
    if req.last_user_blocks[0].get("type") != "tool_result":  # a new question
        code = WRITE if writing else READ
        return Reply([tool_use("run_code", {"language": "python", "code": code})])
    out = stdout_of(req)
    if writing:
        return Reply([text(f"Done: /buddy/work/out/x.txt holds the note ({out[0]} characters).")])
    kept = "still in memory" if out[1] == "True" else "gone from memory (the sandbox restarted)"
    return Reply([text(f"x.txt says: {out[0]!r}. The variable holding its length is {kept}.")])


@dataclass
class Outcome:
    h: Harness
    thread: str
    sandbox: FakeSandbox
    answers: list[str]


def answers(h: Harness, thread: str) -> list[str]:
    texts = [m.get("text") or "" for m in h.bot_messages(thread)]
    return [t for t in texts if t.startswith(("Done:", "x.txt says:"))]


async def stopped_sandbox_thread(root: Path, monkeypatch: pytest.MonkeyPatch | None) -> Outcome:
    async with running_bot("buddy", script, root, monkeypatch) as h:
        assert h.buddy is not None
        h.buddy.inactivity_timeout_s = IDLE_S
        first = await h.slack.post_user_message(CHANNEL, ASK_WRITE, mention=True)
        thread = first["ts"]
        await h.slack.wait_for(lambda: len(answers(h, thread)) == 1, 30)
        (sandbox,) = h.buddy.sandboxes.values()
        await h.slack.wait_for(lambda: sandbox.status == "STOPPED", 15)  # quiet: Buddy stops it
        await asyncio.sleep(0.5)
        await h.slack.post_user_message(CHANNEL, ASK_READ, thread_ts=thread)
        await h.slack.wait_for(lambda: len(answers(h, thread)) == 2, 30)
        await asyncio.sleep(0.5)  # the outputs of the run reach the thread
        return Outcome(h, thread, sandbox, answers(h, thread))


async def test_a_thread_resumes_on_its_stopped_sandbox(sandbox_root: Path, monkeypatch) -> None:
    outcome = await stopped_sandbox_thread(sandbox_root, monkeypatch)
    h, buddy = outcome.h, outcome.h.buddy
    assert buddy is not None
    assert outcome.answers == [
        f"Done: /buddy/work/out/x.txt holds the note ({len(NOTE)} characters).",
        f"x.txt says: {NOTE!r}. The variable holding its length is gone from memory "
        "(the sandbox restarted).",
    ]
    # one sandbox, stopped by Buddy and started again by the bot: not a new one
    assert len(buddy.requests_to("POST", r"/sandboxes$")) == 1
    # started again by the bot (more than once if, on a slow machine, Buddy's 1 s timeout
    # stops it again between the resume and the next command)
    starts = {r.path for r in buddy.requests_to("POST", r"/start$")}
    assert starts == {f"/workspaces/acme/sandboxes/{outcome.sandbox.id}/start"}
    statuses = [status for _, status, _ in outcome.sandbox.history][:7]
    assert statuses == [
        *("STARTING", "RUNNING", "STOPPING", "STOPPED"),
        *("STARTING", "RESTORING", "RUNNING"),  # waited through, disk attached again
    ]
    # the model was told the files stayed and the processes did not
    second = next(r for r in h.model.requests if ASK_READ in question(r))
    assert STOPPED in second.last_user_text and STOPPED not in h.model.requests[0].last_user_text
    assert "x.txt" in " ".join(f.get("name", "") for m in h.bot_messages(outcome.thread)
                               for f in m.get("files") or [])  # fmt: skip
    assert "Traceback" not in h.texts(outcome.thread)


async def test_session_idle_action_stop_keeps_the_sandbox_for_the_thread(
    sandbox_root: Path, monkeypatch
) -> None:
    """SESSION_IDLE_ACTION=stop: the bot stops the quiet thread's sandbox itself, says so,
    and the next question runs in the same sandbox again."""
    async with running_bot(
        "buddy", script, sandbox_root, monkeypatch,
        session_idle_timeout=1.0, session_idle_action="stop", session_retain_s=7200,
    ) as h:  # fmt: skip
        assert h.buddy is not None
        first = await h.slack.post_user_message(CHANNEL, ASK_WRITE, mention=True)
        thread = first["ts"]
        await h.wait_for_text(thread, "sandbox was stopped; its files are kept for 2 hours", 15)
        (sandbox,) = h.buddy.sandboxes.values()
        assert sandbox.status == "STOPPED"
        assert [r.json for r in h.buddy.requests_to("POST", r"/stop$")] == [{}]
        await h.slack.post_user_message(CHANNEL, ASK_READ, thread_ts=thread)
        await h.slack.wait_for(lambda: len(answers(h, thread)) == 2, 30)
    assert f"x.txt says: {NOTE!r}" in answers(h, thread)[-1]
    assert len(h.buddy.requests_to("POST", r"/sandboxes$")) == 1
    assert "was shut down" not in h.texts(thread)


# -- the transcript


def transcript(outcome: Outcome) -> str:
    """The thread as Slack shows it, with what Buddy did in between, on one clock."""
    h, buddy = outcome.h, outcome.h.buddy
    assert buddy is not None
    events: list[tuple[float, str, str]] = []
    for message in h.slack.thread(CHANNEL, outcome.thread):
        who = "bot " if message.get("bot_id") else "user"
        body = (message.get("text") or "").replace(f"<@{h.slack.bot_user_id}>", "@bot")
        files = [f.get("name", "?") for f in message.get("files") or []]
        body += f" [file: {', '.join(files)}]" if files else ""
        events.append((float(message["ts"]), f"slack {who}", body))
    for at, status, why in outcome.sandbox.history:
        events.append((at, "buddy", f"sandbox {outcome.sandbox.id} {status}" + _why(why)))
    for request in buddy.requests:
        if (line := _request_line(request)) is not None:
            events.append((request.at, "buddy", line))
    start = min(at for at, _, _ in events)
    lines = [_header()]
    for at, source, body in sorted(events, key=lambda e: e[0]):
        first, *rest = body.splitlines() or [""]
        lines.append(f"+{at - start:7.3f}s  {source:<10} {first}")
        lines += [f"{'':21}{line}" for line in rest]
    second = next(r for r in h.model.requests if ASK_READ in question(r))
    note = next(line for line in second.last_user_text.splitlines() if line.startswith("Note:"))
    cell = next(r for r in h.model.requests if r.tool_results() and ASK_READ in question(r))
    lines += ["", "What the model was told with question 2 (system prompt, session part):", note]
    result = cell.tool_results()[-1].text
    lines += ["", "The tool result of its first cell after the start:", result]
    return "\n".join(lines) + "\n"


def _why(why: str) -> str:
    return f" ({why})" if why else ""


def _request_line(request: RecordedRequest) -> str | None:
    """The Buddy calls worth showing: create, start, stop, and refusals."""
    tail = request.path.removeprefix("/workspaces/acme")
    wanted = request.method == "POST" and tail.endswith(("/sandboxes", "/start", "/stop"))
    if not wanted and request.status < 400:
        return None
    return f"{request.method} {tail} -> {request.status}"


def _header() -> str:
    return (
        "A Slack thread resumed on a stopped Buddy sandbox\n"
        "(tests/slack/test_slack_stopped_sandbox.py)\n"
        "The bot's Slack app (bot.slack.listen.app.serve, as python -m bot runs it) against fake\n"
        "Slack, Messages API and Buddy servers on loopback. The fake Buddy runs commands for\n"
        f"real and stops a sandbox after {IDLE_S:g} s without activity (Buddy's `timeout`,\n"
        "which the bot sets to BUDDY_SANDBOX_TIMEOUT, 900 s by default).\n"
        "Times are from the first event; 'slack' lines are the thread's messages as they\n"
        "stand at the end (progress messages are edited in place), 'buddy' lines the\n"
        "sandbox's status changes and the create/start calls.\n"
    )


async def _main(path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="sandbox-root-"))
    root.chmod(0o711)
    try:
        path.write_text(transcript(await stopped_sandbox_thread(root, None)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1])))
