"""Benchmark: many Slack threads at once, against the fake Slack and model servers.

Run from the repository root: `.venv/bin/python -m bench.concurrency [--threads 10 50 200]
[--repeat 3] [--timings | --profile]`.

For each batch size N, N threads are started at once, each in its own channel (so Slack's
per-channel pacing is not what is measured). Every run is one tool call then an answer:
the fake model answers each turn in 1 s and an in-process fake sandbox answers each
run_code in 0.2 s, so a run takes 2.2 s at best and a batch of N started together ideally
finishes in 2.2 s too.

The bot (`bot.slack.listen.app.serve`, with a runtime that carries the fake sandbox provider) runs
in its own process, so its event loop and memory are measured apart from the fakes, which
run in this process. Reported per batch:

- wall time from the first event pushed to the last answer posted, against 2.2 s, and the
  completed runs per minute against the ideal N / 2.2 s;
- event-loop lag: a task in the bot's process sleeps 10 ms in a loop and records how late it
  wakes; p99 over the batch (the same for the fakes' process, to show they kept up);
- memory per idle session: growth of the bot process's RSS (after gc.collect() and
  malloc_trim) from before the batch to after every run has finished, divided by N. The
  sessions stay open (idle) with their sandboxes, as they do until the idle timeout;
- the CPU time the bot's event-loop thread, the whole bot process and the fakes used
  during the batch, and the garbage collector's share of the bot's;
- where the time over 2.2 s went, per run: event to the first model request, model reply
  to run_code, run_code to the next model request, model reply to the answer in Slack.

Each batch size is run --repeat times (a fresh bot, store and fakes each time); the table
shows the run with the median wall time and the range over all of them.

With --timings, one more run of the largest batch times the bot's store calls, Slack calls,
model turns and waits for pending edits (a few clock reads per call); --profile adds cProfile
on the bot's event-loop thread, which slows the bot about twofold. Neither is in the table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import ctypes
import gc
import io
import multiprocessing
import os
import pstats
import re
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench import percentile, sandbox_root
from bot.cli import settle_heap
from bot.errors import SandboxError, SandboxPathError
from bot.sandbox.base import (
    CommandState,
    ExecResult,
    FileEntry,
    Language,
    MakeRoom,
    Output,
    Sandbox,
    SandboxInfo,
    SandboxSpec,
)
from bot.settings import Settings
from bot.slack.listen.app import serve
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.slack_harness import NO_TIERS, fake_world

MODEL_S = 1.0  # each model turn
SANDBOX_S = 0.2  # each run_code
IDEAL_S = MODEL_S + SANDBOX_S + MODEL_S
TICK_S = 0.010  # the lag probe's sleep
PACING_SCALE = 1000.0  # slack_rate_scale: the fake does not rate-limit here
BATCH_TIMEOUT_S = 180.0
ANSWER = "Answer for thread {}."
NO_REPORT = "_No report.md was written this time._"  # the last post of each run here

TARGET_RATIO = 0.9  # throughput within 10% of ideal at the largest batch
TARGET_LAG_MS = 50.0
TARGET_MB_PER_SESSION = 1.0


def channel_of(i: int) -> str:
    return f"C{i:08d}"


def index_of(channel: str) -> int:
    return int(channel[1:])


# --------------------------------------------------------------------------- the fake sandbox


class SleepySandbox:
    """A sandbox whose run_code takes SANDBOX_S and succeeds; it holds no files."""

    def __init__(self, sandbox_id: str, key: str, timings: list[tuple[str, float, float]]) -> None:
        self.id = sandbox_id
        self._key = key
        self._timings = timings

    async def run_code(self, language: Language, code: str, timeout_s: float) -> ExecResult:
        started = time.monotonic()
        await asyncio.sleep(SANDBOX_S)
        ended = time.monotonic()
        self._timings.append((self._key, started, ended))
        return ExecResult("ok", 0, Output("ok\n"), Output(""), ended - started)

    async def restart_kernel(self) -> None:
        pass

    async def warm(self, imports: Sequence[str]) -> bool:
        return False

    async def start_command(self, language: Language, code: str) -> str:
        raise SandboxError("detached commands are not part of this benchmark")

    async def command_state(self, command_id: str, wait_s: float = 0.0) -> CommandState:
        raise SandboxError(f"no command {command_id}")

    async def kill_command(self, command_id: str) -> None:
        raise SandboxError(f"no command {command_id}")

    async def upload(self, path: str, chunks: AsyncIterator[bytes]) -> int:
        return sum([len(chunk) async for chunk in chunks])

    async def download(self, path: str) -> AsyncIterator[bytes]:
        raise SandboxPathError(f"{path} does not exist")
        yield b""  # an async generator, as the protocol's callers iterate it

    async def list_dir(self, path: str) -> list[FileEntry]:
        return []

    async def stop(self) -> None:
        pass

    async def wake(self) -> bool:
        return False

    async def destroy(self) -> None:
        pass


class SleepyProvider:
    """Makes SleepySandboxes at once and keeps them until destroyed."""

    def __init__(self) -> None:
        self.sandboxes: dict[str, SleepySandbox] = {}
        self.timings: list[tuple[str, float, float]] = []  # (session key, run start, run end)
        self._made = 0

    async def create(self, spec: SandboxSpec) -> Sandbox:
        self._made += 1
        sandbox = SleepySandbox(f"sleepy-{self._made}", spec.session_key, self.timings)
        self.sandboxes[sandbox.id] = sandbox
        return sandbox

    async def attach(self, sandbox_id: str) -> Sandbox | None:
        return self.sandboxes.get(sandbox_id)

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        return [SandboxInfo(i, None) for i in self.sandboxes]

    def has_room(self) -> bool:
        return True

    def waiting_for_slot(self, session_key: str) -> int:
        return 0  # no cap on live sandboxes here

    def on_full(self, make_room: MakeRoom) -> None:
        pass

    async def destroy_id(self, sandbox_id: str) -> None:
        self.sandboxes.pop(sandbox_id, None)

    async def close(self) -> None:
        pass


# --------------------------------------------------------------------------- the lag probe


class LagProbe:
    """Sleeps TICK_S in a loop and records (when it woke, how late it woke)."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float]] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def between(self, start: float, end: float) -> list[float]:
        return [late for at, late in self.samples if start <= at <= end]

    async def _run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(TICK_S)
            after = time.monotonic()
            self.samples.append((after, after - before - TICK_S))


# --------------------------------------------------------------------------- the bot process


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settled_rss() -> int:
    """RSS once garbage is collected and freed heap memory is handed back to the system."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_bytes()


class Timings:
    """Time spent in the store, Slack calls and model turns, as the bot's code sees it."""

    def __init__(self) -> None:
        self.store_busy = 0.0  # on the store's worker thread
        self.store_calls = 0
        self.store_commits = 0  # write transactions: writes queued together share one
        self.waits: dict[str, list[float]] = defaultdict(list)  # what -> seconds awaited
        self._lock = threading.Lock()

    def install(self) -> None:
        from slack_sdk.web.async_client import AsyncWebClient

        import bot.agent.loop
        from bot.slack.web.edits import Edits
        from bot.store.sqlite import SqliteStore
        from bot.store.sqlite_worker import StoreWorker

        timings = self
        run_group, submit = StoreWorker._run_group, SqliteStore._submit

        def timed_run_group(worker: Any, conn: Any, group: list[Any]) -> None:
            started = time.perf_counter()
            try:
                run_group(worker, conn, group)
            finally:
                with timings._lock:
                    timings.store_busy += time.perf_counter() - started
                    timings.store_calls += len(group)
                    timings.store_commits += group[0].write

        async def timed_submit(store: Any, job: Any, *, write: bool) -> Any:
            async with timings.waiting("store call (queue + run)"):
                return await submit(store, job, write=write)

        api_call = AsyncWebClient.api_call

        async def timed_api_call(client: Any, method: str, *args: Any, **kwargs: Any) -> Any:
            async with timings.waiting(f"Slack {method}"):
                return await api_call(client, method, *args, **kwargs)

        create_message = bot.agent.loop.create_message

        async def timed_create_message(*args: Any, **kwargs: Any) -> Any:
            async with timings.waiting("model turn (1.0 s in the fake)"):
                return await create_message(*args, **kwargs)

        settle = Edits.settle

        async def timed_settle(edits: Any, *args: Any) -> None:
            async with timings.waiting("Edits.settle (end of run)"):
                await settle(edits, *args)

        Edits.settle = timed_settle  # type: ignore[method-assign]
        StoreWorker._run_group = timed_run_group  # type: ignore[method-assign]
        SqliteStore._submit = timed_submit  # type: ignore[method-assign]
        AsyncWebClient.api_call = timed_api_call  # type: ignore[method-assign]
        bot.agent.loop.create_message = timed_create_message  # type: ignore[assignment]

    @contextlib.asynccontextmanager
    async def waiting(self, what: str) -> AsyncIterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.waits[what].append(time.monotonic() - started)

    def reset(self) -> None:
        with self._lock:
            self.store_busy, self.store_calls, self.store_commits = 0.0, 0, 0
        self.waits.clear()

    def report(self) -> dict[str, Any]:
        waits = {
            what: (len(xs), statistics.median(xs), percentile(xs, 0.95), max(xs))
            for what, xs in self.waits.items()
        }
        return {
            "store_busy": self.store_busy,
            "store_calls": self.store_calls,
            "store_commits": self.store_commits,
            "waits": waits,
        }


def bot_main(settings: Settings, conn: Connection, instrument: bool) -> None:
    """The bot process: `serve` with the fake sandbox provider, answering the parent's
    questions (lag samples, memory, sandbox timings, profiles) over `conn`."""
    asyncio.run(_bot_main(settings, conn, instrument))


async def _bot_main(settings: Settings, conn: Connection, instrument: bool) -> None:
    timings = Timings()
    if instrument:
        timings.install()
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except EOFError:
                message = ("stop",)
            loop.call_soon_threadsafe(inbox.put_nowait, message)
            if message[0] == "stop":
                return

    threading.Thread(target=read, daemon=True).start()
    provider = SleepyProvider()
    collector = CollectorMeter()
    settle_heap()  # as `python -m bot` does before it serves
    probe = LagProbe()
    probe.start()
    stop = asyncio.Event()
    serving = asyncio.create_task(serve(settings, stop, provider=provider))
    profiler: cProfile.Profile | None = None
    while True:
        command = asyncio.create_task(inbox.get())
        await asyncio.wait([command, serving], return_when=asyncio.FIRST_COMPLETED)
        if not command.done():
            command.cancel()
            conn.send(("serve ended", repr(serving.exception())))
            return
        name, *args = command.result()
        if name == "lag":
            conn.send(probe.between(*args))
        elif name == "memory":
            conn.send((settled_rss(), len(provider.sandboxes)))
        elif name == "cpu":  # this thread runs the event loop
            conn.send((time.thread_time(), time.process_time(), collector.spent_s))
        elif name == "sandbox":
            conn.send(list(provider.timings))
        elif name == "watch start":
            timings.reset()
            if args[0]:
                profiler = cProfile.Profile()
                profiler.enable()
            conn.send("ok")
        elif name == "watch stop":
            if profiler is not None:
                profiler.disable()
            conn.send((_profile_text(profiler) if profiler else "", timings.report()))
        elif name == "stop":
            stop.set()
            await serving
            await probe.stop()
            conn.send("stopped")
            return


class CollectorMeter:
    """The CPU the garbage collector takes, in whichever thread it runs (its callbacks
    mark each collection's start and end)."""

    def __init__(self) -> None:
        self.spent_s = 0.0
        self._began = 0.0
        gc.callbacks.append(self._mark)

    def _mark(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.thread_time()
        else:
            self.spent_s += time.thread_time() - self._began


def _profile_text(profiler: cProfile.Profile, rows: int = 22) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    if dump := os.environ.get("BENCH_PROFILE_OUT"):
        stats.dump_stats(dump)  # for a closer look: pstats.Stats(dump).print_callers(...)
    out.write(_split_text(stats))
    stats.sort_stats("tottime").print_stats(rows)
    stats.sort_stats("cumulative").print_stats(rows)
    return out.getvalue()


# Parts of the bot's process, by where a function's own time is spent (first match wins).
IDLE = "waiting in epoll (idle included)"
PARTS = (
    (IDLE, "'poll' of 'select.epoll'"),  # wall time: the loop asleep counts here
    ("bot: Slack front end", "/bot/slack/"),
    ("bot: model loop", "/bot/agent/"),
    ("bot: engine and sessions", "/bot/sessions/"),
    ("bot: store", "/bot/store/"),
    ("bot: other", "/bot/"),
    ("anthropic SDK", "/anthropic/"),
    ("httpx / httpcore / anyio (model client)", ("/httpx", "/httpcore", "/anyio/", "/h11/")),
    (
        "aiohttp / slack_sdk / slack_bolt (both clients)",
        ("/slack_sdk/", "/slack_bolt/", "/aiohttp/", "/yarl/", "/multidict/"),
    ),
    ("pydantic", "pydantic"),
    ("sqlite3", "sqlite3"),
    ("json", ("/json/", "json.")),
    ("asyncio and selectors", ("/asyncio/", "select.", "/selectors.py")),
    ("sockets", ("_socket.", "/ssl.py", "socket")),
)


def _split_text(stats: pstats.Stats) -> str:
    """The profile's own time by part of the bot's process, largest first."""
    totals: dict[str, float] = defaultdict(float)
    for (path, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{path}:{name}"
        part = next(
            (
                label
                for label, marks in PARTS
                for m in ((marks,) if isinstance(marks, str) else marks)
                if m in where
            ),
            "other (stdlib, builtins)",
        )
        totals[part] += row[2]
    idle = totals.pop(IDLE, 0.0)
    whole = sum(totals.values()) or 1.0
    lines = ["own time by part of the bot process (cProfile, event-loop thread):"]
    for part, spent in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"  {part:<44} {spent:7.2f} s  {spent / whole:5.1%}")
    lines.append(f"  ({IDLE}: {idle:.2f} s more, not in the shares)")
    return "\n".join(lines) + "\n\n"


class BotProcess:
    def __init__(self, settings: Settings, instrument: bool) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self.process = context.Process(target=bot_main, args=(settings, child, instrument))
        self.process.start()
        child.close()

    async def ask(self, *message: Any) -> Any:
        self._conn.send(message)
        answer = await asyncio.to_thread(self._conn.recv)
        if isinstance(answer, tuple) and answer and answer[0] == "serve ended":
            raise RuntimeError(f"the bot stopped: {answer[1]}")
        return answer

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ask("stop"), 60)
        await asyncio.to_thread(self.process.join, 10)
        if self.process.is_alive():
            self.process.kill()


# --------------------------------------------------------------------------- the fakes' side


class Model:
    """One tool call, then the answer; each turn takes MODEL_S. Records when each turn was
    asked for, by thread index."""

    def __init__(self) -> None:
        self.asked: dict[tuple[int, int], float] = {}

    def __call__(self, req: ModelRequest) -> Reply:
        first = req.messages[0]["content"]
        question = first if isinstance(first, str) else first[0].get("text", "")
        match = re.search(r"question (\d+)", question)
        i = int(match.group(1)) if match else -1
        self.asked[(i, req.turn)] = time.monotonic()
        if req.turn == 0:
            call = tool_use("run_code", {"language": "python", "code": "print('ok')"})
            return Reply([call], delay_s=MODEL_S)
        return Reply([text(ANSWER.format(i))], delay_s=MODEL_S)


@dataclass
class Batch:
    threads: int
    wall_s: float = 0.0
    push_s: float = 0.0
    done: int = 0
    lag_ms: list[float] = field(default_factory=list)
    fake_lag_ms: list[float] = field(default_factory=list)
    rss_before: int = 0
    rss_after: int = 0
    sessions_open: int = 0
    phases: dict[str, list[float]] = field(default_factory=dict)
    cpu_loop_s: float = 0.0  # the bot's event-loop thread, during the batch
    cpu_bot_s: float = 0.0  # the whole bot process (the store's thread too)
    cpu_gc_s: float = 0.0  # the garbage collector's share of it
    cpu_fakes_s: float = 0.0  # this process
    profile: str = ""
    timings: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return IDEAL_S / self.wall_s if self.wall_s else 0.0

    @property
    def per_minute(self) -> float:
        return self.done / self.wall_s * 60 if self.wall_s else 0.0

    @property
    def mb_per_session(self) -> float:
        return (self.rss_after - self.rss_before) / self.threads / 2**20


POSTS = ("chat.postMessage", "chat.startStream", "chat.appendStream", "chat.stopStream")


class Watcher:
    """Scans the fake Slack's calls as they arrive: when each channel got its answer and its
    last post."""

    def __init__(self, calls: list[Any]) -> None:
        self._calls = calls
        self._seen = 0
        self.answered: dict[int, float] = {}
        self.finished: dict[int, float] = {}

    def scan(self) -> None:
        calls, self._seen = self._calls[self._seen :], len(self._calls)
        for call in calls:
            if call.method not in POSTS or call.error:
                continue
            said = str(call.args)  # a message's text, or a stream's chunks
            channel = str(call.args.get("channel") or "")
            if "Answer for thread" in said:
                self.answered.setdefault(index_of(channel), call.at)
            if NO_REPORT in said or call.method == "chat.stopStream":  # its last post
                self.finished.setdefault(index_of(channel), call.at)

    async def until(self, wanted: Callable[[], bool], within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            self.scan()
            if wanted():
                return True
            await asyncio.sleep(0.005)
        return False


async def run_batch(n: int, root: Path, watch: str, ui: str = "classic") -> Batch:
    """`watch`: "" (measure only), "timings" or "profile" (see the module's docstring);
    `ui`: the Slack style (SLACK_UI)."""
    model = Model()
    await asyncio.to_thread(root.mkdir)
    async with fake_world("local", model, root, None, NO_TIERS, slack_ui=ui) as h:
        settings = h.settings.model_copy(
            update={
                "slack_rate_scale": PACING_SCALE,
                "spool_dir": root / "spool",
            }
        )
        probe = LagProbe()
        probe.start()
        bot = BotProcess(settings, instrument=bool(watch))
        try:
            await h.slack.wait_for(lambda: h.slack.connections > 0, 60)
            watcher = Watcher(h.slack.calls)
            # One run first, so one-off costs (first connections, lazy imports) are not
            # counted against the batch or its memory.
            await h.slack.post_user_message(channel_of(0), "question 0", mention=True)
            if not await watcher.until(lambda: 0 in watcher.finished, 30):
                raise RuntimeError("the warm-up run did not finish")
            await asyncio.sleep(0.5)
            result = Batch(n)
            result.rss_before, _ = await bot.ask("memory")
            if watch:
                await bot.ask("watch start", watch == "profile")
            sent: dict[int, float] = {}

            async def start(i: int) -> None:
                user = f"U{i:08d}"
                await h.slack.post_user_message(
                    channel_of(i), f"question {i}", user=user, mention=True
                )
                sent[i] = time.monotonic()

            cpu_before = await bot.ask("cpu")
            fakes_before = time.process_time()
            begin = time.monotonic()
            await asyncio.gather(*(start(i) for i in range(1, n + 1)))
            result.push_s = time.monotonic() - begin
            everyone = set(range(1, n + 1))
            await watcher.until(lambda: everyone <= watcher.answered.keys(), BATCH_TIMEOUT_S)
            answered = {i: at for i, at in watcher.answered.items() if i in everyone}
            end = max(answered.values(), default=begin)
            result.done = len(answered)
            result.wall_s = end - begin
            result.cpu_fakes_s = time.process_time() - fakes_before
            cpu_after = await bot.ask("cpu")
            result.cpu_loop_s = cpu_after[0] - cpu_before[0]
            result.cpu_bot_s = cpu_after[1] - cpu_before[1]
            result.cpu_gc_s = cpu_after[2] - cpu_before[2]
            if watch:
                result.profile, result.timings = await bot.ask("watch stop")
            lags = await bot.ask("lag", begin, end)
            result.lag_ms = [x * 1000 for x in lags]
            result.fake_lag_ms = [x * 1000 for x in probe.between(begin, end)]
            await watcher.until(lambda: everyone <= watcher.finished.keys(), 60)
            await asyncio.sleep(1.0)  # the runs' last store writes
            result.rss_after, result.sessions_open = await bot.ask("memory")
            runs = await bot.ask("sandbox")
            result.phases = phases(sent, model.asked, runs, answered)
        finally:
            await bot.stop()
            await probe.stop()
    return result


def phases(
    sent: dict[int, float],
    asked: dict[tuple[int, int], float],
    runs: list[tuple[str, float, float]],
    answered: dict[int, float],
) -> dict[str, list[float]]:
    """Per run, the seconds each step took beyond the model's and sandbox's own time."""
    ran = {index_of(key.split(":")[1]): (start, end) for key, start, end in runs}
    out: dict[str, list[float]] = defaultdict(list)
    for i, done in answered.items():
        if (i, 0) not in asked or (i, 1) not in asked or i not in ran:
            continue
        first, second, (run_start, run_end) = asked[(i, 0)], asked[(i, 1)], ran[i]
        out["event → 1st model request"].append(first - sent[i])
        out["1st model reply → run_code"].append(run_start - first - MODEL_S)
        out["run_code → 2nd model request"].append(second - run_end)
        out["2nd model reply → answer posted"].append(done - second - MODEL_S)
        out["total over 2.2 s"].append(done - sent[i] - IDEAL_S)
    return dict(out)


# --------------------------------------------------------------------------- the report


def median_run(runs: list[Batch]) -> Batch:
    return sorted(runs, key=lambda b: b.wall_s)[len(runs) // 2]


def print_report(sizes: list[list[Batch]], watched: Batch | None) -> None:
    print(
        f"\nEach run: model {MODEL_S:.1f} s → run_code {SANDBOX_S:.1f} s → model {MODEL_S:.1f} s"
        f" = {IDEAL_S:.1f} s ideal; all N threads start at once, one channel each."
    )
    print(
        f"slack_rate_scale = {PACING_SCALE:g}: the fake Slack does not "
        "rate-limit, so the bot's own pacing is set out of the way."
    )
    print(
        "The bot runs in its own process; the fake Slack and model in this one. "
        f"Each size run {len(sizes[0])} time(s); shown: the run with the median wall time.\n"
    )
    header = (
        f"{'threads':>7} {'done':>5} {'wall s':>7} {'range':>11} {'ideal s':>7} "
        f"{'ideal/wall':>10} {'runs/min':>8} {'ideal/min':>9} {'lag p99 ms':>10} "
        f"{'lag max':>8} {'fakes p99':>9} {'MB/session':>10}"
    )
    print(header)
    print("-" * len(header))
    shown = [median_run(runs) for runs in sizes]
    for b, runs in zip(shown, sizes, strict=True):
        walls = [r.wall_s for r in runs]
        spread = f"{min(walls):.2f}-{max(walls):.2f}"
        print(
            f"{b.threads:>7} {b.done:>5} {b.wall_s:>7.2f} {spread:>11} {IDEAL_S:>7.1f} "
            f"{b.ratio:>10.2f} {b.per_minute:>8.0f} {b.threads / IDEAL_S * 60:>9.0f} "
            f"{percentile(b.lag_ms, 0.99):>10.1f} {max(b.lag_ms, default=0):>8.1f} "
            f"{percentile(b.fake_lag_ms, 0.99):>9.1f} {b.mb_per_session:>10.3f}"
        )
    big = max(shown, key=lambda b: b.threads)
    worst_lag = max(percentile(b.lag_ms, 0.99) for b in shown)
    worst_mb = max(b.mb_per_session for b in shown)
    print(
        "\ntargets: "
        f"throughput ≥ {TARGET_RATIO:.0%} of ideal at {big.threads} threads: "
        f"{big.ratio:.0%} {_verdict(big.ratio >= TARGET_RATIO)}; "
        f"loop lag p99 < {TARGET_LAG_MS:.0f} ms: worst {worst_lag:.1f} ms "
        f"{_verdict(worst_lag < TARGET_LAG_MS)}; "
        f"< {TARGET_MB_PER_SESSION:.0f} MB per idle session: worst {worst_mb:.3f} MB "
        f"{_verdict(worst_mb < TARGET_MB_PER_SESSION)}"
    )
    print(
        "ideal/wall: completed runs per minute over the ideal. lag: how late a 10 ms sleep in "
        "the bot's event loop woke, over the batch (fakes p99: the same probe in the fakes' "
        "process). MB/session: growth of the bot process's RSS (after gc.collect and "
        "malloc_trim) from before the batch to after every run finished, / N; the sessions "
        "are still open, idle."
    )
    for b in shown:
        print_batch(b)
    if watched is not None:
        print_watched(watched)


def print_batch(b: Batch) -> None:
    print(
        f"\n{b.threads} threads: events pushed in {b.push_s * 1000:.0f} ms; "
        f"{b.sessions_open} sessions open afterwards (warm-up included); "
        f"RSS {b.rss_before / 2**20:.1f} → {b.rss_after / 2**20:.1f} MB."
    )
    print(
        f"  CPU from the first event to the last answer ({b.wall_s:.2f} s, 2 cores): "
        f"bot event loop {b.cpu_loop_s:.2f} s ({b.cpu_loop_s / b.threads * 1000:.1f} ms "
        f"per run), bot process {b.cpu_bot_s:.2f} s, fakes {b.cpu_fakes_s:.2f} s; "
        f"of the bot's, the garbage collector {b.cpu_gc_s:.2f} s "
        f"({b.cpu_gc_s / b.threads * 1000:.1f} ms per run)."
    )
    print("  Per run, seconds beyond the fakes' own time:")
    print(f"  {'step':<34} {'median':>7} {'p95':>7} {'max':>7}")
    for step, xs in b.phases.items():
        print(
            f"  {step:<34} {statistics.median(xs):>7.3f} {percentile(xs, 0.95):>7.3f} "
            f"{max(xs):>7.3f}"
        )


def print_watched(b: Batch) -> None:
    t = b.timings
    profiled = ", cProfile on: slower" if b.profile else ""
    print(
        f"\n--- an extra run of {b.threads} threads, timed inside the bot process{profiled}: "
        f"wall {b.wall_s:.2f} s ---"
    )
    print(
        f"store worker thread busy {t['store_busy']:.2f} s of {b.wall_s:.2f} s wall "
        f"({t['store_busy'] / b.wall_s:.0%}), {t['store_calls']} calls, "
        f"{t['store_commits']} write transactions"
    )
    print(f"  {'awaited':<34} {'count':>6} {'median':>7} {'p95':>7} {'max':>7}")
    for what, (count, median, p95, top) in sorted(t["waits"].items()):
        print(f"  {what:<34} {count:>6} {median:>7.3f} {p95:>7.3f} {top:>7.3f}")
    if b.profile:
        print(b.profile)


def _verdict(ok: bool) -> str:
    return "(met)" if ok else "(MISSED)"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each batch size")
    watch = parser.add_mutually_exclusive_group()
    watch.add_argument(
        "--timings", action="store_true", help="one more run of the largest batch, timed"
    )
    watch.add_argument(
        "--profile", action="store_true", help="--timings, plus cProfile of the bot's loop"
    )
    parser.add_argument(
        "--ui", choices=["classic", "assistant"], default="classic",
        help="the Slack style (SLACK_UI; the bot's default is assistant)",
    )  # fmt: skip
    args = parser.parse_args()
    print(f"SLACK_UI={args.ui}")
    sizes: list[list[Batch]] = []
    watched = None
    with sandbox_root() as tmp:
        for n in args.threads:
            runs = []
            for k in range(args.repeat):
                batch = await run_batch(n, tmp / f"n{n}-{k}", "", args.ui)
                runs.append(batch)
                print(f"{n} threads: {batch.done} answered, wall {batch.wall_s:.2f} s", flush=True)
            sizes.append(runs)
        if args.timings or args.profile:
            how = "profile" if args.profile else "timings"
            watched = await run_batch(max(args.threads), tmp / "watched", how, args.ui)
    print_report(sizes, watched)


if __name__ == "__main__":
    asyncio.run(main())
