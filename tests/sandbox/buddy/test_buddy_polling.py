"""The Buddy backend spends few requests on waiting: Buddy's budget is small (the fake's
default, 1000 an hour per token, the stricter reading of the only figure Buddy's docs
show), so waits back off as the Python SDK's do (100 ms x1.5 up to 1 s) and a run waits
on its followed log, not on polls."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from tests.fakes.buddy import FakeBuddy

SLOW_BOOT_S = 3.0


@pytest.fixture
async def fake(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=SLOW_BOOT_S) as buddy:
        yield buddy


@pytest.fixture
async def provider(fake: FakeBuddy) -> AsyncIterator[BuddyProvider]:
    config = BuddyConfig(  # the default poll interval: the one a deployment uses
        token="buddy-test-token", workspace="acme", project="analytics", api_url=fake.base_url
    )
    provider = BuddyProvider(config)
    try:
        yield provider
    finally:
        await provider.close()


async def test_a_slow_boot_and_a_slow_run_cost_a_handful_of_requests(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    polls = fake.requests_to("GET", rf"/sandboxes/{sandbox.id}$")
    # a fixed 100 ms poll would take 30 over the boot; backing off to 1 s takes about 10
    gaps = [b.at - a.at for a, b in itertools.pairwise(polls)]
    assert len(polls) <= 15, [round(gap, 2) for gap in gaps]
    assert gaps[-1] > gaps[0]  # it backs off

    mark = len(fake.requests)
    result = await sandbox.run_code("bash", "sleep 3; echo done", 30)
    assert (result.status, result.stdout.text) == ("ok", "done\n")
    run = fake.requests[mark:]
    # the POST, the followed log, a status read or a few while it still says INPROGRESS
    assert len(run) <= 6, [(r.method, r.path) for r in run]
    await sandbox.destroy()
