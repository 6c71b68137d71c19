"""Benchmark: a trivial run_code on the local sandbox, and the tool loop's own overhead.

Run from the repository root: `.venv/bin/python -m bench.run_code_roundtrip [--calls N]`.
Prints medians from one run; machines here are shared and noisy, so compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from bot.agent.events import Event, ToolCallFinished, ToolCallStarted
from bot.sandbox.base import SandboxSpec
from bot.sandbox.local import LocalProvider
from tests.fakes.anthropic_api import FakeAnthropic, Reply, text, tool_use
from tests.support import runtime_for


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


async def loop_overhead(root: Path, calls: int) -> tuple[float, float, float]:
    """Per tool call: the loop's wall time, the sandbox's share, and what remains."""

    def script(req):
        if req.turn < calls:
            return Reply([tool_use("run_code", {"language": "bash", "code": "echo 1"})])
        return Reply([text("done")])

    sandbox_time = 0.0
    call_started = 0.0

    async def reporter(event: Event) -> None:
        # The sandbox's share is timed from the caller's side, from start to finish event.
        nonlocal sandbox_time, call_started
        if isinstance(event, ToolCallStarted):
            call_started = time.perf_counter()
        elif isinstance(event, ToolCallFinished):
            sandbox_time += time.perf_counter() - call_started

    async with FakeAnthropic(script) as fake:
        runtime = runtime_for(fake.base_url, root, max_turns=calls + 5)
        session = runtime.new_session("bench-loop")
        await session.sandbox()
        started = time.perf_counter()
        await session.ask("go", reporter)
        total = time.perf_counter() - started
        await session.close()
        await runtime.close()
    per_call = total / calls
    sandbox_share = sandbox_time / calls
    return per_call, sandbox_share, per_call - sandbox_share


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    calls = parser.parse_args().calls
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.chmod(tmp, 0o711)  # the sandbox user must be able to reach its folders
        medians = await sandbox_roundtrips(root / "a", calls)
        for language, median in medians.items():
            print(
                f"run_code round trip, local sandbox, {language:6}: median {median * 1000:7.1f} ms"
            )
        bare = await bare_model_turns(calls)
        print(f"one streamed model turn against the fake (SDK only): median {bare * 1000:.1f} ms")
        per_call, sandbox_share, rest = await loop_overhead(root / "b", calls)
        print(
            f"tool loop, per tool call: {per_call * 1000:.1f} ms in all, "
            f"{sandbox_share * 1000:.1f} ms in the sandbox, {rest * 1000:.1f} ms model + loop"
        )
        print(
            f"loop's own overhead per tool call (beyond sandbox and a bare model turn): "
            f"{(rest - bare) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
