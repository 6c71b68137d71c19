"""What a background job costs the model: check_command calls (polls) and model turns for
jobs of 4 s, 60 s and 10 min, on both backends, in three ways: check_command's default waits
(30 s, doubling with each further wait on the command, up to TOOL_TIMEOUT_S); the longest
wait each time (`wait_s` at TOOL_TIMEOUT_S, 120 s by default); and answering at once
(`wait_s: 0`, which is how check_command behaved before it waited).

Time is scaled down by SCALE so the whole benchmark takes about five minutes: a "60 s" job
sleeps 6 s, the first default wait of 30 s is 3 s, and the model answers each turn in 0.03 s
(0.3 s, a quick model, at full scale). Polls and turns do not depend on the scale: they are
ratios of the job's length to the waits, or to the model's turn time.

    .venv/bin/python -m bench.detached_waits
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench import sandbox_root
from bot.compose import Runtime
from bot.run_events import RunFinished, discard
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.fakes.buddy import FakeBuddy
from tests.support import buddy_settings, settings_for

SCALE = 10
JOBS_S = (4, 60, 600)
TURN_S = 0.3  # a quick model's turn, at full scale
MAX_TURNS = 15
TOOL_TIMEOUT_S = 120  # the default: the longest a wait may be
COMMAND_WAIT_S = 30  # the default first wait


class Waiter:
    """The model: start the job, then check_command until it has ended, then answer."""

    def __init__(self, wait_s: int | None) -> None:
        self.wait_s = wait_s
        self.polls = 0
        self.command_id = ""

    def __call__(self, req: Any) -> Reply:
        delay = TURN_S / SCALE
        if req.turn == 0:
            job = req.messages[-1]["content"][-1]["text"]
            code = {"language": "bash", "code": f"sleep {job}; echo done", "detached": True}
            return Reply([tool_use("run_code", code)], delay_s=delay)
        result = req.tool_results()[-1].text
        if req.turn == 1:
            self.command_id = result.split("as ")[1].split(";")[0]
        if req.turn == 1 or "status: running" in result:
            self.polls += 1
            args: dict[str, Any] = {"command_id": self.command_id}
            if self.wait_s is not None:
                args["wait_s"] = self.wait_s
            return Reply([tool_use("check_command", args)], delay_s=delay)
        return Reply([text("The job is done.")], delay_s=delay)


@contextlib.asynccontextmanager
async def backend(name: str, root: Path) -> AsyncIterator[dict[str, Any]]:
    if name == "local":
        yield {}
        return
    async with FakeBuddy(root, boot_delay_s=0.05) as buddy:
        yield buddy_settings(buddy.base_url)


async def one(name: str, job_s: float, wait_s: int | None, root: Path) -> str:
    """'polls, turns' for one job."""
    model = Waiter(wait_s)
    async with backend(name, root) as extra, FakeAnthropic(model) as fake:
        limits = {
            "max_turns": MAX_TURNS,
            "tool_timeout_s": TOOL_TIMEOUT_S // SCALE,
            "command_wait_s": COMMAND_WAIT_S // SCALE,
        }
        settings = settings_for(fake.base_url, root, **limits, **extra)
        runtime = Runtime.from_settings(settings)
        session = runtime.sessions.new(f"bench-wait-{name}-{job_s}-{wait_s}")
        try:
            result = await session.ask(f"{job_s / SCALE:g}", discard)
        finally:
            await session.close()
            await runtime.close()
    ended = isinstance(result, RunFinished) and result.answer == "The job is done."
    return f"{model.polls}, {len(fake.requests)}" + ("" if ended else " (out of turns)")


async def main() -> None:
    print(f"time scaled 1/{SCALE}; MAX_TURNS {MAX_TURNS}; a model turn {TURN_S} s\n")
    print("| backend | job | default waits: polls, turns | 120 s waits | at once (before) |")
    print("|---|---|---|---|---|")
    with sandbox_root() as root:
        for name in ("local", "buddy"):
            for job_s in JOBS_S:
                waited = await one(name, job_s, None, root)
                longest = await one(name, job_s, TOOL_TIMEOUT_S // SCALE, root)
                at_once = await one(name, job_s, 0, root)
                cells = " | ".join((waited, longest, at_once))
                print(f"| {name} | {_length(job_s)} | {cells} |", flush=True)


def _length(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds >= 60 else f"{seconds} s"


if __name__ == "__main__":
    asyncio.run(main())
