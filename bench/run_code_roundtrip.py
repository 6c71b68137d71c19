"""Benchmark: a trivial run_code on the local sandbox, and the tool loop's own overhead.

Run from the repository root: `.venv/bin/python -m bench.run_code_roundtrip [--calls N]`.
Prints medians from one run; machines here are shared and noisy, so compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from pathlib import Path

from bench import sandbox_root
from bench.servers import served
from bot.sandbox.base import SandboxSpec
from bot.sandbox.local import LocalProvider
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import buddy_settings, runtime_for


async def sandbox_roundtrips(root: Path, calls: int) -> dict[str, float]:
    """Wall time of `run_code` per language, from the caller's side."""
    provider = LocalProvider(root)
    sandbox = await provider.create(SandboxSpec(session_key="bench"))
    snippets = {"python": "print(1)", "bash": "echo 1", "node": "console.log(1)"}
    medians = {}
    try:
        for language, code in snippets.items():
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                result = await sandbox.run_code(language, code, 30)
                times.append(time.perf_counter() - started)
                assert result.status == "ok", result
            medians[language] = statistics.median(times)
    finally:
        await sandbox.destroy()
        await provider.close()
    return medians


async def bare_model_turns(calls: int) -> float:
    """Median of one streamed request to the fake model, straight through the SDK."""
    async with FakeAnthropic(lambda req: Reply([text("ok")])) as fake:
        client = fake.client()
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            params = {"model": "claude-sonnet-5-5", "max_tokens": 100}
            messages = [{"role": "user", "content": "hi"}]
            async with client.messages.stream(**params, messages=messages) as stream:
                await stream.get_final_message()
            times.append(time.perf_counter() - started)
        await client.close()
    return statistics.median(times)


CALLS = 30


def many_calls(req):
    """The scripted model of the overhead benchmark: CALLS trivial tool calls, then done."""
    if req.turn < CALLS:
        return Reply([tool_use("run_code", {"language": "bash", "code": "echo 1"})])
    return Reply([text("done")])


async def loop_overhead(root: Path, backend: str) -> tuple[float, float]:
    """Per tool call: wall time, and CPU time in the bot's own process (the fake model and
    the fake Buddy run in processes of their own; the sandbox's processes are children)."""
    async with contextlib.AsyncExitStack() as stack:
        model_url = await stack.enter_async_context(
            served("anthropic", "bench.run_code_roundtrip:many_calls")
        )
        extra = {}
        if backend == "buddy":
            buddy_url = await stack.enter_async_context(served("buddy", str(root)))
            extra = buddy_settings(buddy_url)
        runtime = runtime_for(model_url, root, max_turns=CALLS + 5, **extra)
        session = runtime.sessions.new(f"bench-loop-{backend}")
        await session.sandbox()
        wall, cpu = time.perf_counter(), time.process_time()
        await session.ask("go", lambda event: _nothing())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await session.close()
        await runtime.close()
    return wall / CALLS, cpu / CALLS


async def _nothing() -> None:
    return None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    calls = parser.parse_args().calls
    with sandbox_root() as root:
        medians = await sandbox_roundtrips(root / "a", calls)
        for language, median in medians.items():
            print(
                f"run_code round trip, local sandbox, {language:6}: median {median * 1000:7.1f} ms"
            )
        bare = await bare_model_turns(calls)
        print(f"one streamed model turn against the fake (SDK only): median {bare * 1000:.1f} ms")
        for backend in ("local", "buddy"):
            wall, cpu = await loop_overhead(root / backend, backend)
            print(
                f"tool loop on {backend:5}: {wall * 1000:.1f} ms wall per tool call "
                f"(model turn + sandbox + bot), {cpu * 1000:.2f} ms CPU in the bot's process"
            )


if __name__ == "__main__":
    asyncio.run(main())
