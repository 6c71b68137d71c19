"""Benchmark: what one reaper pass costs with 100,000 sessions in the store.

Run from the repository root: `.venv/bin/python -m bench.reaper_cost [--sessions 100000]
[--live 100] [--backend sqlite|redis|both] [--repeat 3]`.

The store holds --sessions sessions, as a long-lived bot's would: all but --live of them are
done (no sandbox, quiet for months); --live hold a sandbox and were active just now. Nothing
is due, so a pass has nothing to do but find that out. For each store (a SQLite file on
/dev/shm; a private redis-server this benchmark starts on a free loopback port) it prints
the reaper pass's time (the median of --repeat), the Python memory it allocated at its peak
(tracemalloc), and the session records it read; then the same for the orphan sweeper's
question (which sandboxes do sessions hold); last, what pruning the done sessions takes.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.idle_threads import NoSandboxes
from bot.compose import Runtime
from bot.sessions.engine import Engine
from bot.store.base import SessionRecord, Store, StoreError
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore
from tests.counting_store import CountingStore, counting
from tests.redis_server import redis_server
from tests.support import settings_for

IDLE_S = 900.0
DAY = 86_400.0


def record(n: int, now: float, live: bool) -> SessionRecord:
    key = f"T1:C{n % 50:02d}:{1_600_000_000 + n}.000100"
    if live:
        return SessionRecord(key, f"sb-{n}", "active", None, now, now)
    old = now - 200 * DAY - n
    return SessionRecord(key, None, "idle", None, old, old)


async def fill(store: Store, sessions: int, live: int) -> None:
    now = time.time()
    chunk = 500
    for start in range(0, sessions, chunk):
        batch = range(start, min(sessions, start + chunk))
        await asyncio.gather(*(store.save_session(record(n, now, n < live)) for n in batch))


async def measure(
    name: str, counter: CountingStore, work: Callable[[], Awaitable[object]], repeat: int
) -> None:
    times = []
    for _ in range(repeat):
        counter.reset()
        began = time.perf_counter()
        try:
            await work()
        except StoreError as exc:  # the whole store read at once may outlast a timeout
            print(f"  {name:22} failed after {time.perf_counter() - began:.1f} s: {exc}")
            return
        times.append(time.perf_counter() - began)
    counter.reset()
    tracemalloc.start()
    await work()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"  {name:22} {statistics.median(times) * 1000:9.1f} ms  "
        f"peak {peak / 2**20:7.1f} MB  {counter.total:>7} sessions read"
    )


async def bench(
    label: str, store: Store, root: Path, sessions: int, live: int, repeat: int
) -> None:
    await store.open()
    try:
        began = time.perf_counter()
        await fill(store, sessions, live)
        print(f"{label}: {sessions} sessions ({live} live), written in "
              f"{time.perf_counter() - began:.0f} s")  # fmt: skip
        wrapped, counter = counting(store)
        settings = settings_for("http://127.0.0.1:9", root, session_idle_timeout=IDLE_S)
        runtime = Runtime.from_settings(settings, provider=NoSandboxes())  # type: ignore[arg-type]
        engine: Engine = runtime.engine(wrapped, _ignore_view, lambda source: _nothing)
        await measure("reaper pass", counter, engine.reap, repeat)
        await measure("sandboxes owned", counter, engine.owned_sandbox_ids, repeat)
        await runtime.close()
        await prune(store, sessions - live)
    finally:
        await store.close()


async def prune(store: Store, done: int) -> None:
    """Retention's first pass over the done sessions (90 days), then VACUUM (SQLite)."""
    began = time.perf_counter()
    pruned = await store.prune(time.time() - 90 * DAY, time.time() - 90 * DAY)
    took = time.perf_counter() - began
    print(f"  prune                  {took * 1000:9.1f} ms  {pruned.sessions:>7} of {done} done")
    if isinstance(store, SqliteStore):
        size = store.path.stat().st_size
        await store.vacuum()
        print(f"  VACUUM: {size / 2**20:.1f} MB -> {store.path.stat().st_size / 2**20:.1f} MB")


async def main(sessions: int, live: int, backend: str, repeat: int) -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="reaper-cost-") as tmp:
        root = Path(tmp)
        if backend in ("sqlite", "both"):
            await bench("SQLite", SqliteStore(root / "store.db"), root, sessions, live, repeat)
        if backend in ("redis", "both"):
            async with redis_server(root / "redis", appendfsync="everysec") as server:
                await bench("Redis", RedisStore(server.url), root, sessions, live, repeat)


def _ignore_view(key: str) -> Callable[[object], Awaitable[None]]:
    return _ignore


async def _ignore(event: object) -> None:
    pass


def _nothing() -> None:
    return None


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=100)
    parser.add_argument("--backend", choices=["sqlite", "redis", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (the median)")
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.live, args.backend, args.repeat))
