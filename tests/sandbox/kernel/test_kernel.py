"""The Python kernel, on both backends (Buddy against the fake Buddy API): state between
calls, time limits, interrupts, kills, deaths, restarts, charts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.errors import BotError
from bot.sandbox.base import OUT_DIR, WORK_DIR, ExecResult, Sandbox, SandboxProvider, SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalProvider
from tests.fakes.buddy import FakeBuddy
from tests.support import local_provider_at, matplotlib_in_sandbox

GRACE_S = 1.0  # an interrupted cell's time to return (3 s in production)
WARM = ("numpy", "pandas", "no_such_module_here")  # a missing one is skipped
MARK = "open('/buddy/work/cell-running', 'w').close()"  # a cell's first line: it has begun


async def cell_running(sandbox: Sandbox, within_s: float = 60.0) -> None:
    """Wait until a cell that began with MARK is running (its mark is in the work folder)."""
    deadline = time.monotonic() + within_s
    while "cell-running" not in {entry.name for entry in await sandbox.list_dir(WORK_DIR)}:
        assert time.monotonic() < deadline, "the cell never began"
        await asyncio.sleep(0.05)


LOOP_IGNORING_INTERRUPTS = (
    "import time\n"
    "while True:\n"
    "    try:\n"
    "        time.sleep(10)\n"
    "    except KeyboardInterrupt:\n"
    "        print('not stopping')\n"
)


@contextlib.asynccontextmanager
async def provider_on(backend: str, root: Path, **options: Any) -> AsyncIterator[SandboxProvider]:
    if backend == "local":
        provider: SandboxProvider = local_provider_at(
            root, Limits(kernel_grace_s=GRACE_S), **options
        )
        try:
            yield provider
        finally:
            await provider.close()
        return
    async with buddy_on(root, **options) as (_, provider):
        yield provider


@contextlib.asynccontextmanager
async def buddy_on(root: Path, **options: Any) -> AsyncIterator[tuple[FakeBuddy, BuddyProvider]]:
    async with FakeBuddy(root, boot_delay_s=0.05) as fake:
        fake.status_lag_s = 0.02
        config = BuddyConfig(
            token=fake.token,
            workspace=fake.workspace,
            project=fake.project,
            api_url=fake.base_url,
            retry_base_delay_s=0.01,
            poll_interval_s=0.02,
            kernel_grace_s=GRACE_S,
            **options,
        )
        provider = BuddyProvider(config)
        try:
            yield fake, provider
        finally:
            await provider.close()


@pytest.fixture
async def sandbox(backend: str, sandbox_root: Path) -> AsyncIterator[Sandbox]:
    async with provider_on(backend, sandbox_root) as provider:
        made = await provider.create(SandboxSpec(session_key="kernel"))
        yield made
        await made.destroy()


async def python(sandbox: Sandbox, code: str, timeout_s: float = 20) -> ExecResult:
    return await sandbox.run_code("python", code, timeout_s)


# -- state --


async def test_state_survives_between_calls(sandbox: Sandbox) -> None:
    first = await python(sandbox, "import json\nrows = [{'n': n} for n in range(5)]")
    assert (first.status, first.kernel) == ("ok", "started")
    second = await python(sandbox, "total = sum(r['n'] for r in rows)\njson.dumps(total)")
    assert (second.status, second.stdout.text, second.kernel) == ("ok", "'10'\n", "kept")
    # bash is still a process of its own, and sees the files the kernel wrote
    await python(sandbox, "open('/buddy/work/total.txt', 'w').write(f'{total}\\n');")
    shell = await sandbox.run_code("bash", "cat /buddy/work/total.txt", 10)
    assert (shell.stdout.text, shell.kernel) == ("10\n", None)


async def test_a_warmed_kernel_has_its_imports_and_its_first_cell_still_hears_it_is_new(
    sandbox: Sandbox,
) -> None:
    assert await sandbox.warm(WARM)
    assert await sandbox.warm(WARM)  # once up, warming again does nothing
    first = await python(
        sandbox, "import sys\nprint(sorted({'numpy', 'pandas'} & set(sys.modules)), dir())"
    )
    assert (first.status, first.kernel) == ("ok", "started")
    assert "['numpy', 'pandas']" in first.stdout.text and "_bot_warm" not in first.stdout.text
    second = await python(sandbox, "print(1)")
    assert second.kernel == "kept"


@pytest.mark.parametrize("after_s", [0.0, 0.05, 0.2])
async def test_a_sandbox_closed_as_its_kernel_warms_is_removed_whole(
    backend: str, sandbox_root: Path, after_s: float
) -> None:
    """Cancelled while the kernel starts or imports, the warm-up leaves no kernel behind
    to write into the sandbox as it is removed."""
    async with provider_on(backend, sandbox_root) as provider:
        made = await provider.create(SandboxSpec(session_key="warming"))
        warming = asyncio.create_task(made.warm(WARM))
        await asyncio.sleep(after_s)
        warming.cancel()
        await asyncio.gather(warming, return_exceptions=True)
        await made.destroy()  # raised "Directory not empty" when a kernel lived on
    assert not [p for p in sandbox_root.iterdir() if p.name.startswith("lcl-")]


async def test_a_kernel_killed_after_warming_is_started_afresh(sandbox: Sandbox) -> None:
    assert await sandbox.warm(WARM)
    await sandbox.restart_kernel()
    first = await python(sandbox, "print('numpy' in __import__('sys').modules)")
    assert (first.stdout.text, first.kernel) == ("False\n", "started")
    assert (await python(sandbox, "print(2)")).kernel == "kept"


async def test_timeout_interrupts_the_cell_and_keeps_state(sandbox: Sandbox) -> None:
    started = time.monotonic()
    result = await python(sandbox, "x = 1\nimport time\ntime.sleep(30)\nx = 2", timeout_s=1)
    assert (result.status, result.exit_code, result.kernel) == ("timeout", None, "interrupted")
    assert "KeyboardInterrupt" in result.stderr.text
    assert "sci_kernel" not in result.stderr.text  # the kernel's own frames are not shown
    assert time.monotonic() - started < 5
    after = await python(sandbox, "x")
    assert (after.stdout.text, after.kernel) == ("1\n", "kept")


async def test_a_cell_ignoring_the_interrupt_gets_a_restarted_kernel(sandbox: Sandbox) -> None:
    await python(sandbox, "x = 1")
    started = time.monotonic()
    result = await python(sandbox, LOOP_IGNORING_INTERRUPTS, timeout_s=1)
    took = time.monotonic() - started
    assert (result.status, result.kernel) == ("timeout", "restarted")
    assert "not stopping" in result.stdout.text
    assert 1 + GRACE_S < took < 6  # the limit, then the grace
    after = await python(sandbox, "x")
    assert (after.status, after.kernel) == ("error", "fresh")
    assert "NameError" in after.stderr.text


async def test_cancelling_a_cell_interrupts_it_and_keeps_state(sandbox: Sandbox) -> None:
    task = asyncio.create_task(python(sandbox, f"y = 7\n{MARK}\nimport time\ntime.sleep(60)", 120))
    await cell_running(sandbox)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 3  # interrupted, not waited out or killed
    after = await python(sandbox, "y")
    assert (after.stdout.text, after.kernel) == ("7\n", "kept")


async def test_cancelling_a_cell_that_will_not_stop_restarts_the_kernel(sandbox: Sandbox) -> None:
    await python(sandbox, "y = 7")
    task = asyncio.create_task(python(sandbox, f"{MARK}\n{LOOP_IGNORING_INTERRUPTS}", 120))
    await cell_running(sandbox)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    after = await python(sandbox, "print('alive')\ny")
    assert (after.stdout.text, after.kernel) == ("alive\n", "fresh")
    assert "NameError" in after.stderr.text


@pytest.mark.parametrize(
    ("code", "status", "exit_code", "said"),
    [
        ("import os\nos._exit(3)", "error", 3, "it exited with code 3"),
        # What the kernel's OOM killer does to a process
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "killed", None, "memory"),
        ("import ctypes\nctypes.string_at(0)", "error", 139, "segmentation fault"),
    ],
    ids=["exit", "sigkill", "segfault"],
)
async def test_a_kernel_that_dies_is_replaced_and_the_model_told(
    sandbox: Sandbox, code: str, status: str, exit_code: int | None, said: str
) -> None:
    await python(sandbox, "kept = 'x'")
    died = await python(sandbox, code)
    assert (died.status, died.kernel) == (status, "died")
    if exit_code is not None:
        assert died.exit_code == exit_code
    assert said in died.kernel_note
    after = await python(sandbox, "print('fresh')\nkept")
    assert (after.stdout.text, after.kernel) == ("fresh\n", "fresh")
    assert "NameError" in after.stderr.text


async def test_a_memory_blow_up_is_a_memoryerror_and_keeps_state(sandbox: Sandbox) -> None:
    await python(sandbox, "small = list(range(10))")
    blown = await python(sandbox, "big = bytearray(64 << 30)")
    assert (blown.status, blown.kernel) == ("error", "kept")
    assert "MemoryError" in blown.stderr.text
    after = await python(sandbox, "len(small)")
    assert (after.stdout.text, after.kernel) == ("10\n", "kept")


async def test_restart_gives_a_clean_kernel(sandbox: Sandbox) -> None:
    await python(sandbox, "z = 1")
    await sandbox.restart_kernel()
    after = await python(sandbox, "z")
    assert (after.status, after.kernel) == ("error", "started")  # asked for: no note
    await sandbox.restart_kernel()  # with no kernel running: nothing to do
    assert (await python(sandbox, "1 + 1")).stdout.text == "2\n"


async def test_an_attached_sandbox_has_a_fresh_kernel(backend: str, sandbox_root: Path) -> None:
    async with provider_on(backend, sandbox_root) as provider:
        made = await provider.create(SandboxSpec(session_key="restart"))
        await python(made, "w = 1")
        if backend == "local":  # the bot restarts: its sandboxes are found again
            assert isinstance(provider, LocalProvider)
            await provider.close()
            provider = local_provider_at(sandbox_root)
        else:
            assert isinstance(provider, BuddyProvider)
            provider = BuddyProvider(provider.config)
        try:
            again = await provider.attach(made.id)
            assert again is not None
            after = await python(again, "w")
            assert (after.status, after.kernel) == ("error", "fresh")
            await again.destroy()
        finally:
            await provider.close()


async def test_detached_python_runs_outside_the_kernel(sandbox: Sandbox) -> None:
    await python(sandbox, "v = 1")
    command_id = await sandbox.start_command("python", "print('v' in dir())")
    for _ in range(200):
        state = await sandbox.command_state(command_id)
        if not state.running:
            break
        await asyncio.sleep(0.05)
    assert state.result.stdout.text == "False\n"
    assert state.result.kernel is None


async def test_plt_show_saves_charts_to_out(sandbox: Sandbox) -> None:
    if not matplotlib_in_sandbox():
        pytest.skip("matplotlib is not installed for the sandbox's python3")
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3])\n"
        "plt.show()\n"
        "fig, ax = plt.subplots()\n"
        "ax.bar(['a', 'b'], [3, 4])\n"
        "plt.savefig('/buddy/work/out/mine.png')\n"
        "plt.figure()\n"
        "plt.plot([3, 2, 1]);\n"  # left open: saved when the cell ends
    )
    result = await python(sandbox, code)
    assert result.status == "ok", result
    assert result.stdout.text == (
        f"[figure saved to {OUT_DIR}/figure-1.png]\n[figure saved to {OUT_DIR}/figure-2.png]\n"
    )
    names = sorted(entry.name for entry in await sandbox.list_dir(OUT_DIR))
    # savefig'd: not twice; each with its chart file (tests/sandbox/kernel/test_kernel_charts.py)
    assert names == [
        "figure-1.chart.json",
        "figure-1.png",
        "figure-2.chart.json",
        "figure-2.png",
        "mine.chart.json",
        "mine.png",
    ]
    png = b"".join([chunk async for chunk in sandbox.download(f"{OUT_DIR}/figure-1.png")])
    assert png.startswith(b"\x89PNG")
    # A kernel restart does not overwrite earlier charts.
    await sandbox.restart_kernel()
    again = await python(sandbox, "import matplotlib.pyplot as plt\nplt.plot([1]);")
    assert again.stdout.text == f"[figure saved to {OUT_DIR}/figure-3.png]\n"


async def test_without_the_kernel_python_is_a_process_per_call(
    backend: str, sandbox_root: Path
) -> None:
    async with provider_on(backend, sandbox_root, python_kernel=False) as provider:
        made = await provider.create(SandboxSpec(session_key="no-kernel"))
        try:
            await python(made, "u = 1")
            after = await python(made, "print(u)")
        finally:
            await made.destroy()
    assert (after.status, after.kernel) == ("error", None)
    assert "NameError" in after.stderr.text


async def test_buddy_cells_are_one_sync_exec_each(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake:
        config = BuddyConfig(
            token=fake.token, workspace=fake.workspace, project=fake.project, api_url=fake.base_url
        )
        provider = BuddyProvider(config)
        try:
            made = await provider.create(SandboxSpec(session_key="contract"))
            mark = len(fake.requests)
            await python(made, "a = 1")
            first = fake.requests[mark:]
            mark = len(fake.requests)
            short = await python(made, "a")
            second = fake.requests[mark:]
            mark = len(fake.requests)
            long = await python(made, "a + 1", timeout_s=600)
            third = fake.requests[mark:]
            await made.destroy()
        finally:
            await provider.close()
    # The first cell starts the kernel (a command left running), then runs as a sync exec.
    assert [(r.method, r.path.split("/")[-1]) for r in first] == [
        ("POST", "commands"),
        ("POST", "exec"),
    ]
    assert "sci_kernel.py" in first[0].json["command"]
    # A warm cell is one request, which returns the cell's frames, whatever its limit.
    for cell in (second, third):
        assert [(r.method, r.path.split("/")[-1]) for r in cell] == [("POST", "exec")]
        assert cell[0].json["runtime"] == "BASH" and "flock" in cell[0].json["command"]
    assert (short.stdout.text, short.kernel) == ("1\n", "kept")
    assert long.stdout.text == "2\n"


STREAM_ACROSS_HAND_OFFS = (
    "import sys, time\n"
    "end = time.monotonic() + 1.6\n"
    "n = 0\n"
    "while time.monotonic() < end:\n"
    "    print(f'line {n}', flush=n % 7 == 0)\n"
    "    sys.stderr.write(f'err {n}\\n')\n"
    "    n += 1\n"
    "    time.sleep(0.001)\n"
    "print('total', n)\n"
)


async def test_a_long_buddy_cell_moves_to_new_execs_and_loses_nothing(
    sandbox_root: Path,
) -> None:
    # Buddy ends a sync exec at 60 s; here at 2 s, with a hand-off every 0.4 s. The cell
    # writes without pause to both streams across the hand-offs.
    async with buddy_on(sandbox_root, cell_hand_off_s=0.4) as (fake, provider):
        made = await provider.create(SandboxSpec(session_key="hand-off"))
        fake.exec_timeout_s = 2
        try:
            await python(made, "x = 1")
            mark = len(fake.requests)
            result = await python(made, STREAM_ACROSS_HAND_OFFS, timeout_s=30)
            calls = fake.requests[mark:]
            mark = len(fake.requests)
            silent = await python(made, "import time\ntime.sleep(1.2)\nx", timeout_s=30)
            silent_calls = fake.requests[mark:]
            after = await python(made, "x + 1")
        finally:
            await made.destroy()
    assert result.status == "ok", result
    lines = result.stdout.text.splitlines()
    total = int(lines[-1].split()[1])
    assert lines == [f"line {n}" for n in range(total)] + [f"total {total}"]
    assert result.stderr.text.splitlines() == [f"err {n}" for n in range(total)]
    execs = [r for r in calls if r.path.endswith("/exec")]
    assert len(execs) >= 2 and len(execs) == len(calls)
    assert all(r.status == 200 for r in execs)  # none reached the ceiling
    # A cell that writes nothing is handed off all the same.
    assert silent.stdout.text == "1\n"
    assert len(silent_calls) >= 2 and all(r.path.endswith("/exec") for r in silent_calls)
    assert (after.stdout.text, after.kernel) == ("2\n", "kept")


def plant_at_the_next_reader(plant: str) -> str:
    return (
        "import glob, os, time\n"
        "out = glob.glob('/buddy/work/.cache/kernel/*/*.out')[0]\n"
        f"{plant}(out + '.1')  # where the next reader's FIFO goes\n"
        "time.sleep(1.5)\n"
        "print('after')\n"
    )


async def test_a_cell_that_plants_a_file_where_its_next_reader_goes_loses_nothing(
    sandbox_root: Path,
) -> None:
    async with provider_on("buddy", sandbox_root, cell_hand_off_s=0.3) as provider:
        made = await provider.create(SandboxSpec(session_key="hand-off-planted"))
        try:
            file = await python(made, plant_at_the_next_reader("os.mknod"), timeout_s=5)
            folder = await python(made, plant_at_the_next_reader("os.mkdir"), timeout_s=5)
            after = await python(made, "print('next')")
        finally:
            await made.destroy()
    # The next reader makes its FIFO in place of a file, and reads on.
    assert (file.status, file.stdout.text) == ("ok", "after\n")
    # A folder it cannot replace: the cell's frames have nowhere to go, and the bot says
    # so, stops the kernel and goes on with a new one.
    assert (folder.status, folder.kernel) == ("killed", "died")
    assert folder.kernel_note == "it stopped answering, so it was stopped"
    assert (after.stdout.text, after.kernel) == ("next\n", "fresh")


async def test_a_buddy_cell_past_its_limit_is_interrupted_between_hand_offs(
    sandbox_root: Path,
) -> None:
    async with provider_on("buddy", sandbox_root, cell_hand_off_s=0.3) as provider:
        made = await provider.create(SandboxSpec(session_key="hand-off-limit"))
        try:
            await python(made, "x = 1")
            result = await python(made, "print('begun')\nwhile True: pass", timeout_s=1.5)
            after = await python(made, "x + 1")
        finally:
            await made.destroy()
    assert (result.status, result.kernel) == ("timeout", "interrupted")
    assert result.stdout.text == "begun\n"
    assert (after.stdout.text, after.kernel) == ("2\n", "kept")


async def test_a_buddy_cell_whose_exec_fails_says_so_and_the_kernel_goes_on(
    sandbox_root: Path,
) -> None:
    async with buddy_on(sandbox_root) as (fake, provider):
        made = await provider.create(SandboxSpec(session_key="faults"))
        try:
            await python(made, "a = 1")
            # The cell ran, but its answer was lost on the way: its output cannot be had.
            fake.fail_next(1, method="POST", path=r"/exec$", status=502, after=True)
            with pytest.raises(BotError) as lost:
                await python(made, "a = 2\nprint(a)")
            result = await python(made, "print(a + 1)")
        finally:
            await made.destroy()
    assert "502" in str(lost.value)
    assert (result.status, result.stdout.text, result.kernel) == ("ok", "3\n", "kept")
