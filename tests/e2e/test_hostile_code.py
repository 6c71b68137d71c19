"""Hostile snippets through the whole loop: each is contained, reported to the model as a
tool result, and the run carries on to an answer. Nothing secret reaches the model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bot.compose import Runtime
from bot.run_events import RunFinished
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import CHECKOUT, Recorder, local_provider_at, settings_for

SECRET = "sk-ant-test-secret"
BOT_SOURCE = str(CHECKOUT / "bot" / "settings" / "__init__.py")

ATTEMPTS: list[tuple[str, str, str, int | None]] = [
    # (what, language, code, timeout_s)
    ("env", "python", "import os, json; print(json.dumps(dict(os.environ)))", None),
    ("home", "bash", "ls -la /root ~root 2>&1; cat /root/.bashrc 2>&1", None),
    ("source", "bash", f"cat {BOT_SOURCE} 2>&1 | head -3", None),
    ("write", "bash", "touch /usr/x /etc/x /buddy/data/x 2>&1; echo done", None),
    (
        "network",
        "python",
        "import socket\ns = socket.create_connection(('1.1.1.1', 443), timeout=3)",
        None,
    ),
    ("fork", "bash", ":(){ :|:& };: 2>/dev/null; sleep 1; echo survived", 10),
    ("memory", "python", "b = bytearray(16 << 30)\nprint('allocated')", None),
    ("flood", "python", "import sys\nsys.stdout.write('x' * (50 << 20))", None),
    ("sleep", "bash", "sleep 30", 2),
]


def hostile_script(req):
    if req.turn < len(ATTEMPTS):
        _, language, code, timeout = ATTEMPTS[req.turn]
        args = {"language": language, "code": code}
        if timeout:
            args["timeout_s"] = timeout
        return Reply([tool_use("run_code", args)])
    return Reply([text("all attempts made")])


@pytest.fixture
def secret_in_env(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test-secret")


@pytest.mark.parametrize("python_kernel", [True, False], ids=["kernel", "process"])
async def test_hostile_snippets_are_contained(
    sandbox_root: Path, secret_in_env, python_kernel: bool
) -> None:
    recorder = Recorder()
    async with FakeAnthropic(hostile_script) as fake:
        settings = settings_for(fake.base_url, sandbox_root, max_turns=20)
        provider = local_provider_at(sandbox_root, python_kernel=python_kernel)
        runtime = Runtime.from_settings(settings, provider)
        session = runtime.sessions.new("hostile")
        try:
            result = await session.ask("try to escape", recorder)
            sandbox = await session.sandbox()
            after = await sandbox.run_code("python", "print('still fine')", 10)
        finally:
            await session.close()
            await runtime.close()

    assert isinstance(result, RunFinished) and result.answer == "all attempts made"
    outcomes = dict(zip([a[0] for a in ATTEMPTS], recorder.finished, strict=True))
    # Every attempt came back as a result, and none of them got what it wanted.
    assert outcomes["home"].status in ("ok", "error")
    assert outcomes["network"].status == "error"
    assert outcomes["fork"].status in ("ok", "error", "timeout")  # limited, then reaped
    assert outcomes["fork"].duration_s < 15
    assert outcomes["memory"].status == "error" and "MemoryError" in outcomes["memory"].excerpt
    assert outcomes["flood"].status == "ok"
    assert outcomes["sleep"].status == "timeout" and outcomes["sleep"].duration_s < 10
    assert after.status == "ok" and after.stdout.text.strip() == "still fine"
    assert after.kernel == ("kept" if python_kernel else None)  # the kernel lived through it

    # What the model saw: nothing secret, no host home, no bot source.
    sent = "\n".join(json.dumps(r.body) for r in fake.requests)
    assert SECRET not in sent.replace(f"Bearer {SECRET}", "")
    assert "xoxb-test-secret" not in sent
    assert "class Settings" not in sent
    results = {a[0]: r for a, r in zip(ATTEMPTS, _all_results(fake), strict=True)}
    assert "ANTHROPIC" not in results["env"] and "SLACK" not in results["env"]
    assert "[… " in results["flood"] and len(results["flood"]) < 20_000
    assert os.path.exists("/usr/x") is False and os.path.exists("/etc/x") is False


def _all_results(fake: FakeAnthropic) -> list[str]:
    last = fake.requests[-1]
    return [
        block["content"]
        for message in last.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
