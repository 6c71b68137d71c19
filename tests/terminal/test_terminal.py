"""`python -m bot ask` as a process: Ctrl-C, and configuration errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import CHECKOUT

ROOT = CHECKOUT
# A command each case can find running (its own: the cases may run at once, in workers).
MARKERS = {"bash": "sleep 61.234", "python": "sleep 61.345"}


def bot_env(sandbox_root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "SANDBOX_"))}
    env.update(SANDBOX_ROOT=str(sandbox_root), SANDBOX_BACKEND="local", **extra)
    return env


def stray_processes(marker: str) -> list[str]:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in ps.stdout.splitlines() if marker in line and "ps -eo" not in line]


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("bash", MARKERS["bash"]),
        ("python", f"import subprocess\nsubprocess.run({MARKERS['python'].split()!r})"),
    ],
    ids=["bash", "python-kernel"],
)
async def test_ctrl_c_kills_the_command_and_destroys_the_sandbox(
    tmp_path: Path, sandbox_root: Path, language: str, code: str
) -> None:
    def script(req):
        if req.turn == 0:
            return Reply([tool_use("run_code", {"language": language, "code": code})])
        return Reply([text("should not get here")])

    async with FakeAnthropic(script) as fake:
        env = bot_env(sandbox_root, ANTHROPIC_BASE_URL=fake.base_url, ANTHROPIC_API_KEY="sk-test")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "ask", "wait", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        seen = b""
        while MARKERS[language].split()[1].encode() not in seen:
            seen += await asyncio.wait_for(proc.stdout.readline(), 20)
        # the step was printed as it started: wait until its command runs in the sandbox
        for _ in range(1000):
            if stray_processes(MARKERS[language]):
                break
            await asyncio.sleep(0.02)
        assert stray_processes(MARKERS[language]), "the command should be running"
        proc.send_signal(signal.SIGINT)
        exit_code = await asyncio.wait_for(proc.wait(), 15)
        err = (await proc.stderr.read()).decode()

    assert exit_code == 130, err
    assert "Cancelled" in err and "Traceback" not in err
    assert stray_processes(MARKERS[language]) == []
    assert list(sandbox_root.iterdir()) == []
    assert len(fake.requests) == 1


def test_bad_setting_stops_with_one_clear_line(tmp_path: Path, sandbox_root: Path) -> None:
    env = bot_env(sandbox_root, MAX_TURNS="many", ANTHROPIC_API_KEY="sk-test")
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "hi"], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Configuration error: MAX_TURNS:")
    assert "Set MAX_TURNS" in lines[0]


def test_missing_api_key_and_missing_file_are_explained(tmp_path: Path, sandbox_root: Path) -> None:
    env = bot_env(sandbox_root)
    env.pop("ANTHROPIC_API_KEY", None)
    # The two processes run at once: neither writes anything the other reads.
    no_key = subprocess.Popen(
        [sys.executable, "-m", "bot", "ask", "hi"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    no_file = subprocess.Popen(
        [sys.executable, "-m", "bot", "ask", "--csv", "nope.csv", "hi"], cwd=tmp_path,
        env={**env, "ANTHROPIC_API_KEY": "sk-test"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _, no_key_err = no_key.communicate(timeout=30)
        _, no_file_err = no_file.communicate(timeout=30)
    finally:
        for proc in (no_key, no_file):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert no_key.returncode == 2 and "ANTHROPIC_API_KEY is not set" in no_key_err
    assert no_file.returncode == 2 and "No such file: nope.csv" in no_file_err
