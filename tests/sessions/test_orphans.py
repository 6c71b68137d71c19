"""Orphan clean-up: the bot's sandboxes that no live session owns are destroyed."""

from __future__ import annotations

import time
from pathlib import Path

from bot.sandbox.base import SandboxSpec
from bot.sessions.orphans import OrphanSweeper
from tests.support import local_provider_at


def owning(*ids: str):
    async def owned() -> set[str]:
        return set(ids)

    return owned


async def test_sweep_destroys_unowned_old_tagged_sandboxes(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root)
    try:
        owned = await provider.create(SandboxSpec("live", tags=("bot",)))
        orphan = await provider.create(SandboxSpec("crashed", tags=("bot",)))
        other = await provider.create(SandboxSpec("not ours", tags=("someone-else",)))
        later = time.time() + 3600  # an hour on: everything is old enough
        sweeper = OrphanSweeper(
            provider, "bot", owning(owned.id), interval_s=60, min_age_s=600, clock=lambda: later
        )
        assert await sweeper.sweep() == [orphan.id]
        remaining = {info.id for info in await provider.list_tagged("bot")}
        assert remaining == {owned.id}
        assert (sandbox_root / other.id).exists()
        # The owned sandbox still works.
        assert (await owned.run_code("bash", "echo ok", 10)).stdout.text == "ok\n"
    finally:
        await provider.close()


async def test_young_sandboxes_are_spared(sandbox_root: Path) -> None:
    """A sandbox still booting for a session that does not know its id yet survives."""
    provider = local_provider_at(sandbox_root)
    try:
        young = await provider.create(SandboxSpec("booting", tags=("bot",)))
        sweeper = OrphanSweeper(provider, "bot", owning(), interval_s=60, min_age_s=600)
        assert await sweeper.sweep() == []
        assert [info.id for info in await provider.list_tagged("bot")] == [young.id]
    finally:
        await provider.close()


async def test_sandbox_left_by_a_dead_process_is_found_by_a_new_one(sandbox_root: Path) -> None:
    first = local_provider_at(sandbox_root)
    left = await first.create(SandboxSpec("crashed", tags=("bot",)))
    await first.close()  # the process "died": its provider is gone, the folder stays
    second = local_provider_at(sandbox_root)
    try:
        sweeper = OrphanSweeper(second, "bot", owning(), interval_s=60, min_age_s=0)
        assert await sweeper.sweep() == [left.id]
        assert not (sandbox_root / left.id).exists()
    finally:
        await second.close()
