"""Benchmark: bringing a quiet thread's sandbox back with its files, three ways, on the fake
Buddy.

Run from the repository root: `.venv/bin/python -m bench.resume [--mb 500] [--boot 8]`.

A sandbox holds one CSV of `--mb` MB in /buddy/work/uploads. Then, from the moment the
thread's next question needs it, until the file is there again:
- re-upload (SESSION_IDLE_ACTION=delete): a new sandbox, and the file uploaded again, at
  `--link` MB/s (the bot fetches it from Slack and sends it to Buddy; on loopback that
  would be nearly free, so the rate is the assumption to vary);
- stop (SESSION_IDLE_ACTION=stop): the stopped sandbox started again;
- snapshot (SESSION_IDLE_ACTION=snapshot): a sandbox made from the snapshot.
It also reports what each way costs when the thread goes quiet (the snapshot's time).
The fake boots a sandbox in `--boot` seconds and restores one in the same time, then
copies the snapshot's disk in; the ratios, not the seconds, are what carry over to Buddy.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator

from bench import sandbox_root
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from tests.fakes.buddy import FakeBuddy

PATH = "/buddy/work/uploads/big.csv"
ROW = b"2024-01-01,Country name,CODE,Indicator name,IND.CODE,123456789.123\n"


async def csv_of(size: int, mb_per_s: float | None = None) -> AsyncIterator[bytes]:
    """`size` bytes of CSV, at most `mb_per_s` (None: as fast as they are taken)."""
    chunk = ROW * ((1 << 20) // len(ROW) + 1)  # about 1 MB
    sent, began = 0, time.monotonic()
    while sent < size:
        part = chunk[: size - sent]
        sent += len(part)
        if mb_per_s:
            await asyncio.sleep(max(0.0, began + sent / (mb_per_s * 1e6) - time.monotonic()))
        yield part


async def present(sandbox, size: int) -> None:
    [entry] = [e for e in await sandbox.list_dir("/buddy/work/uploads") if e.name == "big.csv"]
    assert entry.size == size, entry


async def main(mb: int, boot_s: float, link: float) -> None:
    size = mb * 1_000_000
    with sandbox_root() as root:
        async with FakeBuddy(root, boot_delay_s=boot_s) as fake:
            fake.exec_timeout_s = 600
            provider = BuddyProvider(
                BuddyConfig(
                    token=fake.token, workspace=fake.workspace, project=fake.project,
                    api_url=fake.base_url, poll_interval_s=0.1,
                )
            )  # fmt: skip
            try:
                await run(provider, size, mb, boot_s, link)
            finally:
                await provider.close()


async def run(provider: BuddyProvider, size: int, mb: int, boot_s: float, link: float) -> None:
    spec = SandboxSpec("resume-bench", tags=("bench",))
    first = await provider.create(spec)
    began = time.monotonic()
    await first.upload(PATH, csv_of(size))
    upload_s = time.monotonic() - began
    await present(first, size)

    began = time.monotonic()
    fresh = await provider.create(spec)
    booted_s = time.monotonic() - began
    await fresh.upload(PATH, csv_of(size, link))
    await present(fresh, size)
    reupload_s = time.monotonic() - began
    await fresh.destroy()

    began = time.monotonic()
    snapshot_id = await provider.take_snapshot(first.id, "bench-resume")
    snapshot_s = time.monotonic() - began

    await first.stop()
    began = time.monotonic()
    await first.wake()
    await present(first, size)
    stop_s = time.monotonic() - began
    await first.destroy()

    began = time.monotonic()
    restored = await provider.create(SandboxSpec("resume-bench", snapshot_id=snapshot_id))
    await present(restored, size)
    restore_s = time.monotonic() - began
    await restored.destroy()
    await provider.delete_snapshot(snapshot_id)

    print(f"fake Buddy: boot {boot_s:g} s; one file of {mb} MB in /buddy/work")
    print(f"  upload on loopback, unthrottled               {upload_s:7.2f} s")
    print("back with the file, from the next question:")
    how = f"new sandbox ({booted_s:.1f} s) + upload at {link:g} MB/s"
    print(f"  re-upload: {how:<35}{reupload_s:7.2f} s")
    print(f"  stop: start the stopped sandbox again        {stop_s:7.2f} s")
    print(f"  snapshot: a sandbox made from the snapshot   {restore_s:7.2f} s")
    print(f"  snapshot / re-upload                         {restore_s / reupload_s:7.2f}")
    print("when the thread goes quiet:")
    print(f"  taking the snapshot                          {snapshot_s:7.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=500)
    parser.add_argument("--boot", type=float, default=8.0)
    parser.add_argument(
        "--link", type=float, default=25.0,
        help="MB/s the file comes again at: fetched from Slack and sent to Buddy by the bot",
    )  # fmt: skip
    args = parser.parse_args()
    asyncio.run(main(args.mb, args.boot, args.link))
