"""The Buddy backend against a token that lacks a scope and against Buddy's rate limit:
told clearly, cleaned up after, and waited out until X-Rate-Limit-Reset."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.errors import SandboxConfigError, SandboxUnavailable
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from tests.fakes.buddy import FakeBuddy
from tests.fakes.buddy.access import READ, WORKSPACE, WRITE, RateLimit


@contextlib.asynccontextmanager
async def provider_for(fake: FakeBuddy) -> AsyncIterator[BuddyProvider]:
    config = BuddyConfig(
        token="buddy-test-token",
        workspace="acme",
        project="analytics",
        api_url=fake.base_url,
        retry_base_delay_s=0.01,
        poll_interval_s=0.02,
    )
    provider = BuddyProvider(config)
    try:
        yield provider
    finally:
        await provider.close()


@pytest.mark.parametrize(("missing", "step"), [(WRITE, "creating"), (READ, "waiting")])
async def test_a_missing_scope_is_named_and_nothing_is_left(
    sandbox_root: Path, missing: str, step: str
) -> None:
    scopes = {READ, WRITE, WORKSPACE} - {missing}
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05, scopes=scopes) as fake,
        provider_for(fake) as provider,
    ):
        with pytest.raises(SandboxConfigError) as caught:
            await provider.create(SandboxSpec("s1"))
        assert fake.sandboxes == {}  # made without READ: deleted again
    message = str(caught.value)
    assert message.startswith(f"Buddy refused {step}")
    assert f"this token needs {missing}" in message and "BUDDY_TOKEN" in message


async def test_without_the_workspace_scope_a_lost_create_is_found_by_listing(
    sandbox_root: Path,
) -> None:
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05, scopes={READ, WRITE}) as fake,
        provider_for(fake) as provider,
    ):
        fake.fail_next(1, method="POST", path=r"/sandboxes$", after=True, drop=True)
        with pytest.raises(SandboxUnavailable, match="creating the sandbox failed"):
            await provider.create(SandboxSpec("s1"))
        assert fake.sandboxes == {} and len(fake.deleted) == 1
        assert len(fake.requests_to("GET", r"/identifiers$")) == 1  # refused: 403
        assert len(fake.requests_to("GET", r"/sandboxes$")) == 1  # the fallback


async def test_the_rate_limit_is_waited_out_until_its_reset(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake, provider_for(fake) as provider:
        sandbox = await provider.create(SandboxSpec("s1"))
        fake.rate_limit = RateLimit(limit=2, window_s=1.5)
        started = time.time()
        for _ in range(4):  # two fit in the window, the third waits for the next one
            await sandbox.list_dir("/buddy/work")
        assert len(fake.requests_to("GET", r"/content/")) == 5  # one 429 on the way
        # the retry went once the window had reset (its end, in whole seconds), not after
        # the 10 ms backoff the bot falls back on without the header
        assert time.time() - started >= 1.5
        fake.rate_limit = RateLimit()
        await sandbox.destroy()
