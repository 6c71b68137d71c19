"""A local session's disk quota holds while code runs: a writer that loops is stopped as its
folders pass the quota, the model is told, and an upload that would not fit is refused."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.errors import SandboxError
from bot.sandbox.base import SandboxSpec
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalSandbox
from bot.sandbox.local.quota import used_bytes
from tests.support import local_provider_at

QUOTA = 40 << 20
LOOP_WRITER = """
import os
os.makedirs('/buddy/work/out/fill', exist_ok=True)
block = os.urandom(1 << 20)
i = 0
while True:
    with open(f'/buddy/work/out/fill/{i}.bin', 'wb') as f:
        f.write(block)
    i += 1
"""


@pytest.fixture
async def sandbox(sandbox_root: Path) -> AsyncIterator[LocalSandbox]:
    provider = local_provider_at(sandbox_root, Limits(disk_bytes=QUOTA))
    sandbox = await provider.create(SandboxSpec(session_key="quota"))
    yield sandbox
    await sandbox.destroy()
    await provider.close()


def used(sandbox_root: Path) -> int:
    return used_bytes([next(sandbox_root.glob("lcl-*"))])


@pytest.mark.parametrize("language", ["python", "bash"])
async def test_a_writer_that_loops_is_stopped_at_the_quota(
    sandbox: LocalSandbox, sandbox_root: Path, language: str
) -> None:
    code = (
        LOOP_WRITER
        if language == "python"
        else "mkdir -p /buddy/work/out/fill; i=0; while true; do "
        "head -c 1048576 /dev/urandom > /buddy/work/out/fill/$i.bin; i=$((i+1)); done"
    )
    result = await sandbox.run_code(language, code, timeout_s=60)

    assert result.status == "killed" and "disk quota of 40.0 MB" in result.note
    assert result.duration_s < 30  # stopped by the quota, not by the time limit
    # passed by what the writer wrote between two looks (page-cache speed: ~1 GB/s), not
    # the gigabytes a minute of writing would leave
    assert used(sandbox_root) < QUOTA + (128 << 20)
    cleanup = await sandbox.run_code("bash", "rm -rf /buddy/work/out/fill && echo gone", 30)
    assert cleanup.status == "ok" and "gone" in cleanup.stdout.text, cleanup


async def test_a_session_over_its_quota_may_still_clean_up_but_not_grow(
    sandbox: LocalSandbox, sandbox_root: Path
) -> None:
    big = next(sandbox_root.glob("lcl-*")) / "work" / "big.bin"

    def past_the_quota() -> None:  # as a file from before the limit was lowered would be
        big.write_bytes(os.urandom(QUOTA + (4 << 20)))
        if sandbox.uid is not None:
            os.chown(big, sandbox.uid, sandbox.uid)

    past_the_quota()
    # each call adds a little before it can delete anything (its container's folders, the
    # kernel's start, a note), and the watcher looks many times during each pause
    started = await sandbox.run_code("python", "import time; time.sleep(1.5); print('up')", 30)
    tidy = "echo kept > /buddy/work/note.txt; sleep 1.5; rm /buddy/work/big.bin && echo gone"
    cleaned = await sandbox.run_code("bash", tidy, 30)
    past_the_quota()
    grow = "for i in 1 2 3 4; do head -c 4194304 /dev/urandom > /buddy/work/$i.bin; done; sleep 5"
    grown = await sandbox.run_code("bash", grow, 30)

    assert started.status == "ok" and started.stdout.text == "up\n", started
    assert cleaned.status == "ok" and cleaned.stdout.text == "gone\n", cleaned
    assert grown.status == "killed" and "disk quota" in grown.note, grown


async def test_one_file_cannot_pass_the_quota(sandbox: LocalSandbox) -> None:
    code = "with open('/buddy/work/big.bin', 'wb') as f:\n    f.write(b'x' * (50 << 20))"
    result = await sandbox.run_code("python", code, timeout_s=60)

    assert result.status != "ok"
    assert "File too large" in result.stderr.text or "quota" in result.note


async def test_a_detached_writer_is_stopped_too(sandbox: LocalSandbox) -> None:
    command = await sandbox.start_command("python", LOOP_WRITER)
    for _ in range(300):
        state = await sandbox.command_state(command)
        if not state.running and state.result.note:
            break
        await asyncio.sleep(0.1)

    assert not state.running and state.result.status == "killed"
    assert "disk quota" in state.result.note


async def test_an_upload_past_the_quota_is_refused_and_leaves_nothing(
    sandbox: LocalSandbox, sandbox_root: Path
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(60):
            yield b"y" * (1 << 20)

    with pytest.raises(SandboxError, match=r"disk quota of 40\.0 MB"):
        await sandbox.upload("/buddy/work/uploads/huge.csv", chunks())

    assert not list(sandbox_root.glob("lcl-*/work/uploads/huge.csv"))
    ok = await sandbox.upload("/buddy/work/uploads/small.csv", _one(b"a,b\n1,2\n"))
    assert ok == 8


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data
