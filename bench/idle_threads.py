"""Benchmark: the bot's memory with many idle threads, and after the reaper drops them.

Run from the repository root: `.venv/bin/python -m bench.idle_threads [--threads 10000]
[--history-kb 4]`.

N threads are written to a SQLite store (on /dev/shm, so the disk is not what is measured):
each a session with a conversation of a question, a tool call, its output and an answer
(about --history-kb KB of JSON) and one file. The engine then loads every
one of them, as a message in each thread would (`Engine.open`, without a sandbox: the
provider does nothing), which is what a long-lived process held before idle threads were
dropped. Once they have been quiet for the idle timeout, one reaper pass drops them from
memory. This process is the bot's: it prints its RSS (after gc.collect() and malloc_trim)
before the threads are loaded, once they are, and after they are dropped, then checks that a
dropped thread loads again with its history.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bench.concurrency import settled_rss
from bot.compose import Runtime
from bot.errors import SandboxUnavailable
from bot.sandbox.base import MakeRoom, Sandbox, SandboxInfo, SandboxSpec
from bot.store.base import FileRecord, SessionRecord
from bot.store.sqlite import SqliteStore
from tests.support import settings_for

IDLE_S = 0.5


class NoSandboxes:
    """A provider that is never asked for a sandbox: the threads here are idle."""

    async def create(self, spec: SandboxSpec) -> Sandbox:
        raise SandboxUnavailable("this benchmark makes no sandboxes")

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        return None

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        return []

    def has_room(self) -> bool:
        return True

    def waiting_for_slot(self, session_key: str) -> int:
        return 0  # no cap on live sandboxes here

    def on_full(self, make_room: MakeRoom) -> None:
        pass

    async def destroy_id(self, sandbox_id: str) -> None:
        pass

    async def close(self) -> None:
        pass


def history(n: int, kb: int) -> list[dict[str, Any]]:
    filler = ("x" * 63 + "\n") * max(1, kb * 1024 // 4 // 64)
    call = {"type": "tool_use", "id": f"toolu_{n}", "name": "run_code",
            "input": {"language": "python", "code": f"# thread {n}\n{filler}"}}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": filler}
    return [
        {"role": "user", "content": [{"type": "text", "text": f"question {n}: {filler}"}]},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}: {filler}"}]},
    ]


async def write_threads(store: SqliteStore, keys: list[str], kb: int) -> None:
    now = time.time()
    for n, key in enumerate(keys):
        await store.save_session(SessionRecord(key, None, "idle", None, now, now))
        await store.save_history(key, history(n, kb))
        path, source = "/buddy/work/uploads/data.csv", {"id": f"F{n}", "header": "year,value"}
        await store.add_file(key, FileRecord(f"F{n}", "data.csv", 1000, "0" * 64, path, source))


async def empty() -> AsyncIterator[bytes]:
    yield b""


def mb(size: int) -> str:
    return f"{size / 2**20:8.1f} MB"


async def main(threads: int, kb: int) -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="idle-threads-") as tmp:
        root = Path(tmp)
        settings = settings_for(
            "http://127.0.0.1:9", root / "sandboxes", session_idle_timeout=IDLE_S
        )
        runtime = Runtime.from_settings(settings, provider=NoSandboxes())  # type: ignore[arg-type]
        store = SqliteStore(root / "store.db")
        await store.open()
        keys = [f"T1:C{n % 50:02d}:{1_700_000_000 + n}.000100" for n in range(threads)]
        await write_threads(store, keys, kb)
        engine = runtime.engine(store, lambda key: _ignore, lambda source: empty)
        try:
            before = settled_rss()
            for key in keys:
                await engine.open(key, start=False)
            loaded, held = settled_rss(), engine.threads_in_memory
            await asyncio.sleep(IDLE_S * 1.5)
            await engine.reap()
            dropped, left = settled_rss(), engine.threads_in_memory
            session = await engine.open(keys[0], start=False)  # a dropped thread comes back
            back = len(session.agent.history)
        finally:
            await engine.shutdown(0)
            await runtime.close()
            await store.close()
    print(f"threads: {threads}, history ~{kb} KB each, one file each")
    print(f"RSS before loading   {mb(before)}")
    per_thread = (loaded - before) / held / 1024
    print(f"RSS with {held:>6} held {mb(loaded)}  (+{per_thread:.1f} KB a thread)")
    print(f"RSS after the reaper {mb(dropped)}  ({left} threads left in memory)")
    print(f"a dropped thread's next event loads it again with {back} messages of history")


async def _ignore(event: object) -> None:
    pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--history-kb", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.history_kb))
