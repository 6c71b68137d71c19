"""`python -m bot` as a process when Slack cannot be used as configured: one line naming
the problem and the setting to fix, exit code 2, no traceback."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pytest

from tests.fakes.slack import FakeSlack
from tests.support import CHECKOUT

ROOT = CHECKOUT
BOT_TOKEN, APP_TOKEN = "xoxb-test-token", "xapp-1-A0FAKE001-1-test"
PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def bot_env(root: Path, api_url: str, bot_token: str, app_token: str) -> dict[str, str]:
    prefixes = ("SLACK_", "ANTHROPIC_", "BUDDY_", "SANDBOX_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes) and k not in PROXIES}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        SLACK_BOT_TOKEN=bot_token,
        SLACK_APP_TOKEN=app_token,
        SLACK_API_URL=api_url,
        ANTHROPIC_API_KEY="sk-ant-test",
        SANDBOX_BACKEND="local",
        SANDBOX_ROOT=str(root / "sandboxes"),
        STORE_PATH=str(root / "sessions.db"),
    )
    return env


async def run_bot(env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens there once it is closed


@pytest.mark.parametrize(
    ("bot_token", "app_token", "expected"),
    [
        ("xoxb-wrong", APP_TOKEN, "Slack refused SLACK_BOT_TOKEN (invalid_auth): check "),
        (BOT_TOKEN, "xapp-1-A0FAKE001-1-wrong", "Slack refused SLACK_APP_TOKEN (invalid_auth):"),
    ],
    ids=["bot-token", "app-token"],
)
async def test_a_token_slack_refuses(
    tmp_path: Path, bot_token: str, app_token: str, expected: str
) -> None:
    async with FakeSlack() as slack:
        env = bot_env(tmp_path, slack.api_url, bot_token, app_token)
        code, out, err = await run_bot(env, tmp_path)

    assert (code, out) == (2, ""), err
    [line] = err.strip().splitlines()
    assert line.startswith(expected)
    setting = "SLACK_BOT_TOKEN" if bot_token != BOT_TOKEN else "SLACK_APP_TOKEN"
    assert f"check {setting}; it should be" in line
    assert [c.error for c in slack.calls][-1] == "invalid_auth"
    assert slack.connections == 0


async def test_slack_unreachable(tmp_path: Path) -> None:
    api_url = f"http://127.0.0.1:{closed_port()}/api/"
    code, out, err = await run_bot(bot_env(tmp_path, api_url, BOT_TOKEN, APP_TOKEN), tmp_path)

    assert (code, out) == (2, ""), err
    [line] = err.strip().splitlines()
    assert line.startswith(f"Cannot reach Slack's API at {api_url} (")
    assert line.endswith("check SLACK_API_URL and the network (or proxy) settings.")
