"""A thread's first answer and its sandbox's start: the sandbox is asked for the moment the
mention arrives, its kernel warms (imports made) in the background, and when the answer
had to wait for the sandbox to boot, the footer's time says how much of it that was."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.sessions.pool import POOL_TAG
from tests.fakes.anthropic import Reply, text, tool_use
from tests.slack_harness import CHANNEL, bot_process, fake_world

BOOT_S = 2.0


def analyst(req):
    if req.turn == 0:
        return Reply([tool_use("run_code", {"language": "python", "code": "print(6 * 7)"})])
    return Reply([text("The answer is 42.")])


async def test_the_footer_says_how_long_the_sandbox_took_to_start(
    sandbox_root: Path, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.sessions.session")
    world = fake_world(
        "buddy", analyst, sandbox_root, monkeypatch, buddy_options={"boot_delay_s": BOOT_S},
        kernel_warm_imports="json,csv",
    )  # fmt: skip
    async with world as h, bot_process(h):
        asked = await h.slack.post_user_message(CHANNEL, "six times seven?", mention=True)
        await h.wait_for_text(asked["ts"], "The answer is 42.", timeout=60)
        await h.wait_for_text(asked["ts"], "of it starting the sandbox")
        await h.slack.wait_for(lambda: "its kernel ready after" in caplog.text, 30)
        await h.slack.post_user_message(CHANNEL, "and again?", thread_ts=asked["ts"])
        await h.wait_for_runs(asked["ts"], 2)
    shown = h.texts(asked["ts"])
    assert shown.count("of it starting the sandbox") == 1  # the second run found it up
    [warmed] = [r for r in caplog.records if "its kernel ready" in r.getMessage()]
    assert warmed.sandbox_running_s >= BOOT_S and warmed.kernel_ready_s >= warmed.sandbox_running_s


async def test_a_new_thread_takes_a_warm_sandbox_and_the_pool_refills(
    sandbox_root: Path, monkeypatch
) -> None:
    world = fake_world(
        "buddy", analyst, sandbox_root, monkeypatch,
        buddy_options={"boot_delay_s": BOOT_S}, warm_sandboxes=1, kernel_warm_imports="json",
    )  # fmt: skip
    free = lambda: [i for (i,) in h._query("SELECT sandbox_id FROM pool WHERE claimed_at IS NULL")]  # noqa: E731
    async with world as h, bot_process(h):
        await h.slack.wait_for(free, 30)
        [pooled] = free()
        asked = await h.slack.post_user_message(CHANNEL, "six times seven?", mention=True)
        await h.wait_for_runs(asked["ts"], 1, timeout=60)
        key = f"{h.slack.team_id}:{CHANNEL}:{asked['ts']}"
        [(held,)] = h._query("SELECT sandbox_id FROM sessions WHERE key = ?", key)
        await h.slack.wait_for(lambda: free() and free() != [pooled], 30)
        await h.wait_for_text(asked["ts"], "The answer is 42.")
    assert held == pooled
    assert "of it starting the sandbox" not in h.texts(asked["ts"])
    assert h.buddy is not None and POOL_TAG in h.buddy.sandboxes[held].tags
