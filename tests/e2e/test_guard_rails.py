"""Guard rails: budgets, access, hostile input and secrets, end to end through Slack."""

from __future__ import annotations

import gzip
import json
import re
import time
from pathlib import Path

from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.fakes.slack import DEFAULT_SCOPES
from tests.slack_harness import CHANNEL, Harness, running_bot

EXPENSIVE = {"output_tokens": 100_000}  # $1.00 a turn at Sonnet's $10 per million


def echo(req: ModelRequest) -> Reply:
    texts = [b["text"] for b in req.messages[-1]["content"] if b.get("type") == "text"]
    return Reply([text(f"answer to: {texts[-1] if texts else '?'}"[:200])])


def spender(req: ModelRequest) -> Reply:
    """Calls a tool every turn, each turn costing a dollar."""
    return Reply([tool_use("run_code", {"language": "bash", "code": "echo step"})], usage=EXPENSIVE)


def stops(h: Harness, thread: str) -> list[str]:
    texts = (m.get("text") or "" for m in h.bot_messages(thread))
    return [t for t in texts if t.startswith("I stopped at this run's budget")]


async def test_run_budget_stops_cleanly_and_continue_goes_on(
    sandbox_root: Path, monkeypatch
) -> None:
    async with running_bot(
        "local", spender, sandbox_root, monkeypatch, max_cost_usd_per_run=1.5
    ) as h:
        message = await h.slack.post_user_message(CHANNEL, "spend", mention=True)
        thread = message["ts"]
        await h.wait_for_text(thread, "I stopped at this run's budget of $1.50")
        assert len(h.model.requests) == 2  # $1 + $1 passed $1.50; no third turn
        assert re.search(r"2 turns · \$2\.\d{4} of \$1\.50", h.texts(thread))  # the footer
        note = next(
            m
            for m in h.bot_messages(thread)
            if "stopped at this run's budget" in (m.get("text") or "")
        )
        await h.slack.click_button(note, "continue_run")
        await h.slack.wait_for(lambda: len(stops(h, thread)) == 2)
        assert len(h.model.requests) == 4


async def test_thread_and_daily_budgets(sandbox_root: Path, monkeypatch) -> None:
    def one_dollar(req: ModelRequest) -> Reply:
        return Reply([text("done")], usage=EXPENSIVE)

    async with running_bot(
        "local", one_dollar, sandbox_root, monkeypatch,
        max_cost_usd_per_thread=1.0, max_cost_usd_per_user_day=2.0,
    ) as h:  # fmt: skip
        first = await h.slack.post_user_message(CHANNEL, "one", mention=True)
        await h.wait_for_text(first["ts"], "done")
        await h.slack.post_user_message(CHANNEL, "two", thread_ts=first["ts"])
        await h.wait_for_text(first["ts"], "This thread has used $1.00 of its $1.00 budget")
        second = await h.slack.post_user_message(CHANNEL, "three", mention=True)
        await h.wait_for_text(second["ts"], "done")
        third = await h.slack.post_user_message(CHANNEL, "four", mention=True)
        # $1 of output a turn, and a few thousand tokens of prompt (the tools, the system)
        daily = re.compile(r"You have used \$2\.0\d of your \$2\.00 for today")
        await h.slack.wait_for(lambda: daily.search(h.texts(third["ts"])), 20)
    assert len(h.model.requests) == 2


async def test_access_lists_and_direct_messages(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot(
        "local", echo, sandbox_root, monkeypatch,
        allowed_channels="C0OTHER", allowed_users="U0HUMAN01", allow_dms=False,
    ) as h:  # fmt: skip
        await h.slack.post_user_message(CHANNEL, "hello", mention=True)
        await h.slack.post_user_message("C0OTHER", "hi", mention=True, user="U0STRANGER")
        await h.slack.post_user_message("D0DIRECT1", "psst")
        await h.slack.wait_for(lambda: len(h.slack.ephemerals) == 3)
        # each refusal is told before anything else is done: no session, no sandbox
        assert h.model.requests == [] and h.sandboxes_alive() == 0
        notes = " ".join(e.get("text", "") for e in h.slack.ephemerals)
        assert "not enabled in this channel" in notes and "not on it" in notes
        assert "direct messages" in notes
        allowed = await h.slack.post_user_message("C0OTHER", "allowed", mention=True)
        await h.slack.wait_for(lambda: "answer to: allowed" in _texts(h, "C0OTHER", allowed["ts"]))
    assert [r.messages[-1]["content"][-1]["text"] for r in h.model.requests] == ["allowed"]


async def test_direct_messages_start_a_session(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot("local", echo, sandbox_root, monkeypatch) as h:
        message = await h.slack.post_user_message("D0DIRECT1", "a private question")
        await h.slack.wait_for(
            lambda: "answer to: a private question" in _texts(h, "D0DIRECT1", message["ts"])
        )


def _texts(h: Harness, channel: str, thread: str) -> str:
    return "\n".join(m.get("text") or "" for m in h.slack.thread(channel, thread))


async def test_hostile_files_and_messages(sandbox_root: Path, monkeypatch) -> None:
    bomb = gzip.compress(b"0" * (20 << 20))  # 20 MB of zeros in ~20 KB
    wide = (
        ",".join(f"c{i}" for i in range(100_000)) + "\n" + ",".join("1" * 100_000) + "\n"
    ).encode()
    async with running_bot("local", echo, sandbox_root, monkeypatch) as h:
        files = [
            h.slack.add_file("../../x.csv", b"a,b\n1,2\n"),
            h.slack.add_file("evil\x00name/../y.csv", b"a\n1\n"),
            h.slack.add_file("📊 بيانات.csv", b"a\n1\n"),
            h.slack.add_file("binary.csv", b"a,b\n\x00\x01\x02\x03"),
            h.slack.add_file("bomb.csv", bomb),
            h.slack.add_file("wide.csv", wide),
            h.slack.add_file("notes.json", b"this is not json"),
        ]
        message = await h.slack.post_user_message(CHANNEL, "", files=files, mention=True)
        thread = message["ts"]
        await h.slack.wait_for(
            lambda: h.texts(thread).count(":inbox_tray:") + h.texts(thread).count("Skipped ") >= 7,
            20,
        )
        texts = h.texts(thread)
        empty = await h.slack.post_user_message(CHANNEL, "", mention=True)
        await h.wait_for_text(empty["ts"], "What would you like me to find out?")
        long = await h.slack.post_user_message(CHANNEL, "x" * 40_000, mention=True)
        await h.wait_for_text(long["ts"], "answer to: xxx")
    assert "`/buddy/work/uploads/x.csv`" in texts
    assert "`/buddy/work/uploads/y.csv`" in texts  # the folder part of the name is dropped
    assert "`/buddy/work/uploads/file.csv`" in texts  # nothing printable and plain was left
    assert "Skipped binary.csv: it is binary" in texts
    assert "Skipped bomb.csv: it is gzip-compressed" in texts
    assert "Skipped notes.json: it does not start like JSON" in texts
    assert "*wide.csv* · CSV · 1 row × 100,000 columns" in texts
    uploads = [p.name for p in sandbox_root.glob("lcl-*/work/uploads/*")]
    assert len(uploads) == 4 and all("/" not in u and "\x00" not in u for u in uploads)


async def test_an_empty_mention_makes_no_sandbox(sandbox_root: Path, monkeypatch) -> None:
    """`@bot` alone is asked what to find out, and costs no (billed) Buddy sandbox; the
    answer to that, in the thread without a mention, is the work that makes one."""
    async with running_bot("buddy", echo, sandbox_root, monkeypatch) as h:
        assert h.buddy is not None
        empty = await h.slack.post_user_message(CHANNEL, "", mention=True)
        await h.wait_for_text(empty["ts"], "What would you like me to find out?")
        asked_at = time.time()
        await h.slack.post_user_message(CHANNEL, "how many rows?", thread_ts=empty["ts"])
        await h.wait_for_text(empty["ts"], "answer to: how many rows?")
        made = h.buddy.requests_to("POST", r"/sandboxes$")
    assert len(made) == 1 and made[0].at >= asked_at  # made for the question, not before


async def test_login_page_instead_of_a_file(sandbox_root: Path, monkeypatch) -> None:
    scopes = tuple(s for s in DEFAULT_SCOPES if s != "files:read")
    async with running_bot(
        "local", echo, sandbox_root, monkeypatch, slack_options={"scopes": scopes}
    ) as h:
        csv = h.slack.add_file("data.csv", b"a,b\n1,2\n")
        message = await h.slack.post_user_message(CHANNEL, "sum", files=[csv], mention=True)
        await h.wait_for_text(message["ts"], "sign-in page instead of data.csv")


BAD_URLS = (
    "nonsense",
    "file:///etc/passwd",
    "http://169.254.169.254/latest",
    "https://169.254.169.254/latest",
    "https://user:pass@github.com/o/r",
    "",
)


async def test_analyze_refuses_bad_urls(sandbox_root: Path, monkeypatch) -> None:
    async with running_bot("local", echo, sandbox_root, monkeypatch) as h:
        replies = {}
        for text_ in BAD_URLS:
            envelope = await h.slack.slash_command("/analyze", text_)
            replies[text_] = json.dumps((await h.slack.wait_for_ack(envelope)).get("payload"))
    assert all(
        "https" in replies[t]
        for t in ("nonsense", "file:///etc/passwd", "http://169.254.169.254/latest")
    )
    assert "private or local" in replies["https://169.254.169.254/latest"]
    assert "credentials" in replies["https://user:pass@github.com/o/r"]
    assert "Usage" in replies[""]
    assert h.model.requests == [] and h.sandboxes_alive() == 0


SECRETS = ("xoxb-test-token", "xapp-1-A0FAKE001-1-test", "sk-ant-test-secret", "buddy-test-token")


async def test_secrets_never_reach_slack_or_the_model(
    backend: str, sandbox_root: Path, monkeypatch
) -> None:
    configured = SECRETS if backend == "buddy" else SECRETS[:3]  # no Buddy token locally
    hidden = [f'{s[:4]}""{s[4:]}' for s in configured]  # printed whole, but not in the code
    leak = (
        "env; cat /proc/1/environ; find / -xdev -type f -size -64k 2>/dev/null | head -3000"
        " | xargs cat 2>/dev/null | head -c 3000000; echo " + " ".join(hidden)
    )

    def hostile(req: ModelRequest) -> Reply:
        if not req.tool_results():
            return Reply(
                [tool_use("run_code", {"language": "bash", "code": leak, "timeout_s": 60})]
            )
        return Reply([text("Here are the tokens: " + " ".join(configured))])

    async with running_bot(backend, hostile, sandbox_root, monkeypatch) as h:
        message = await h.slack.post_user_message(CHANNEL, "print every secret", mention=True)
        await h.wait_for_text(message["ts"], "Here are the tokens", timeout=60)
        slack_traffic = json.dumps([c.args for c in h.slack.calls], default=str)
        # What the bot sends the model, less the model's own earlier turns.
        sent = [[m for m in r.messages if m["role"] == "user"] for r in h.model.requests]
        model_traffic = json.dumps([sent, [r.body.get("system") for r in h.model.requests]])
    for secret in configured:
        where = model_traffic.find(secret)
        assert where < 0, model_traffic[max(0, where - 300) : where + 100]
        assert secret not in slack_traffic, secret
        assert secret not in model_traffic, secret
    assert "[redacted]" in slack_traffic and "[redacted]" in model_traffic
    assert "Here are the tokens" in slack_traffic


async def test_a_refused_file_leaves_nothing_in_a_running_sandbox(
    sandbox_root: Path, monkeypatch
) -> None:
    """Once the sandbox is up, files stream straight in; one refused part-way is removed."""
    async with running_bot("local", echo, sandbox_root, monkeypatch, max_file_bytes=300_000) as h:
        first = await h.slack.post_user_message(CHANNEL, "hello", mention=True)
        thread = first["ts"]
        await h.wait_for_text(thread, "answer to: hello")
        big = h.slack.add_file("big.csv", b"a,b\n" + b"1,2\n" * 100_000)  # 400 KB, size unsaid
        big["size"] = 0
        good = h.slack.add_file("good.csv", b"a,b\n1,2\n")
        await h.slack.post_user_message(CHANNEL, "", thread_ts=thread, files=[big, good])
        await h.wait_for_text(thread, "*good.csv* · CSV")
        texts = h.texts(thread)
    assert "Skipped big.csv: it is larger than" in texts
    uploads = sorted(p.name for p in sandbox_root.glob("lcl-*/work/uploads/*"))
    assert uploads == ["good.csv"]
