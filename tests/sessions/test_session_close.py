"""A session closed while its sandbox is still being made: the sandbox, once made, is
removed whole, its kernel's warm-up (begun as it was made) stopped first."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.sessions.session import Session
from tests.support import local_provider_at


async def test_closed_while_its_sandbox_is_made(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root)
    try:
        for n in range(3):
            session = Session(
                f"closing-{n}", provider, lambda sandbox: None,  # type: ignore[arg-type,return-value]
                warm_imports=("json",),
            )  # fmt: skip
            session.start()
            await session.close()  # raised "Directory not empty" when the kernel lived on
            assert not warming(), "a warm-up outlived its session"
        assert not [p for p in sandbox_root.iterdir() if p.name.startswith("lcl-")]
    finally:
        await provider.close()


def warming() -> list[asyncio.Task]:
    return [t for t in asyncio.all_tasks() if "Session._warm" in repr(t.get_coro())]
