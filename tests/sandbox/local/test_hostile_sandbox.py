"""Model-written code attacks the local backend from inside its sandbox: links planted for
the bot's host-side file work, limits it tries to lift, shared resources it tries to
exhaust. Each test is the attack; it passes when the attack gets nowhere."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.compose import Runtime
from bot.errors import SandboxError, SandboxUnavailable
from bot.run_events import RunFinished
from bot.sandbox.base import SandboxSpec
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalProvider, LocalSandbox, cgroups
from bot.sandbox.local.quota import used_bytes
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.leftovers import survivors
from tests.sandbox.local.test_sandbox_isolation import eventually
from tests.support import Recorder, local_provider_at, settings_for


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A host folder outside every sandbox, holding a file the sandbox must not touch."""
    with tempfile.TemporaryDirectory(prefix="host-victim-") as folder:
        path = Path(folder)
        (path / "data.csv").write_text("precious\n")
        yield path


async def _sandbox(root: Path, limits: Limits = Limits()) -> tuple[LocalProvider, LocalSandbox]:  # noqa: B008
    provider = local_provider_at(root, limits)
    return provider, await provider.create(SandboxSpec(session_key="attack"))


async def _chunks(*sizes: int) -> AsyncIterator[bytes]:
    for size in sizes:
        yield b"x" * size


async def _bash(sandbox: LocalSandbox, script: str) -> str:
    result = await sandbox.run_code("bash", script, 30)
    assert result.status == "ok", result.stderr.text
    return result.stdout.text


# -- links planted for the bot's host-side file work --


async def test_oversized_upload_through_a_planted_link_deletes_no_host_file(
    sandbox_root: Path, host_dir: Path
) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(disk_bytes=1 << 20))
    try:
        await _bash(sandbox, f"rm -rf uploads && ln -s {host_dir} uploads")
        with pytest.raises(SandboxError, match="disk quota"):
            await sandbox.upload("/buddy/work/uploads/data.csv", _chunks(2 << 20))
    finally:
        await sandbox.destroy()
        await provider.close()
    assert (host_dir / "data.csv").read_text() == "precious\n"


async def test_destroy_does_not_follow_planted_links(sandbox_root: Path, host_dir: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root)
    try:
        script = f"mkdir -p deep/er && ln -s {host_dir} deep/er/link && ln -s {host_dir} out/x"
        await _bash(sandbox, script)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert (host_dir / "data.csv").read_text() == "precious\n"
    assert not any(sandbox_root.glob("lcl-*"))


async def test_quota_counts_no_host_file_behind_a_link(sandbox_root: Path, host_dir: Path) -> None:
    (host_dir / "big.bin").write_bytes(b"x" * (4 << 20))
    provider, sandbox = await _sandbox(sandbox_root, Limits(disk_bytes=2 << 20))
    try:
        await _bash(sandbox, f"ln -s {host_dir} link && ln -s {host_dir}/big.bin out/big.bin")
        written = await sandbox.upload("/buddy/work/uploads/small.csv", _chunks(1024))
    finally:
        await sandbox.destroy()
        await provider.close()
    assert written == 1024


def _deliverables_script(req) -> Reply:
    if req.turn == 0:
        code = (
            "mkdir report.md && echo secret > /tmp/s && ln -s /etc/passwd out/passwd.png "
            "&& ln -s /tmp/s out/s.csv && echo a,b > out/ok.csv"
        )
        return Reply([tool_use("run_code", {"language": "bash", "code": code})])
    return Reply([text("done")])


async def test_linked_or_folder_deliverables_are_not_posted_and_the_model_is_told(
    sandbox_root: Path,
) -> None:
    async with FakeAnthropic(_deliverables_script) as fake:
        runtime = Runtime.from_settings(
            settings_for(fake.base_url, sandbox_root), local_provider_at(sandbox_root)
        )
        session = runtime.sessions.new("links")
        try:
            first = await session.ask("make the report", Recorder())
            posted = {
                out.name: b"".join([c async for c in out.chunks])
                async for out in session.outputs()
                if out.chunks is not None
            }
            second = await session.ask("and now?", Recorder())
        finally:
            await session.close()
            await runtime.close()
    assert isinstance(first, RunFinished) and isinstance(second, RunFinished)
    assert posted == {"ok.csv": b"a,b\n"}
    told = json.dumps(fake.requests[-1].messages[-1])
    assert "/buddy/work/report.md was a folder" in told
    assert "/buddy/work/out/passwd.png was a symbolic link" in told


# -- one session starving the others --

FILL_PROCESSES = """
import subprocess, time
children = []
try:
    while len(children) < 400:
        children.append(subprocess.Popen(["sleep", "600"]))
except OSError as exc:
    print("full at", len(children), type(exc).__name__, flush=True)
time.sleep(600)
"""


async def _output_of(sandbox: LocalSandbox, command_id: str, needle: str) -> str:
    """The detached command's output once it shows `needle` (or it ended)."""
    while True:
        state = await sandbox.command_state(command_id, wait_s=1.0)
        if needle in state.result.stdout.text or not state.running:
            return state.result.stdout.text


@pytest.mark.skipif(os.geteuid() != 0, reason="without root every sandbox shares one uid")
async def test_one_sandbox_filling_its_process_cap_leaves_others_able_to_start(
    sandbox_root: Path,
) -> None:
    provider = local_provider_at(sandbox_root, Limits(processes=64))
    hog = await provider.create(SandboxSpec(session_key="hog"))
    other = await provider.create(SandboxSpec(session_key="other"))
    try:
        command = await hog.start_command("python", FILL_PROCESSES)
        assert "full at" in await _output_of(hog, command, "full at")
        result = await other.run_code("bash", "echo alive", 30)
    finally:
        await hog.destroy()
        await other.destroy()
        await provider.close()
    assert result.status == "ok" and result.stdout.text == "alive\n"
    assert None not in (hog.uid, other.uid) and hog.uid != other.uid


async def test_detached_commands_are_capped_per_sandbox(sandbox_root: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(max_commands=2))
    try:
        first = await sandbox.start_command("bash", "sleep 600")
        await sandbox.start_command("bash", "sleep 600")
        with pytest.raises(SandboxError, match="already runs 2 detached commands"):
            await sandbox.start_command("bash", "sleep 600")
        await sandbox.kill_command(first)
        third = await sandbox.start_command("bash", "echo third")
        state = await sandbox.command_state(third, wait_s=30)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert state.result.stdout.text == "third\n"


async def test_sandboxes_over_the_cap_wait_for_a_slot(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root, max_sandboxes=1, wait_s=60)
    first = await provider.create(SandboxSpec(session_key="first"))
    waiting = asyncio.create_task(provider.create(SandboxSpec(session_key="second")))
    try:
        assert await eventually(lambda: len(provider.slots.waiting) == 1, within=30)
        assert not waiting.done()
        await first.destroy()
        second = await waiting
        assert (await second.run_code("bash", "echo ok", 30)).stdout.text == "ok\n"
        await second.destroy()
    finally:
        waiting.cancel()
        await first.destroy()
        await provider.close()


async def test_a_sandbox_that_finds_no_slot_is_refused_with_a_reason(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root, max_sandboxes=1, wait_s=0.5)
    first = await provider.create(SandboxSpec(session_key="first"))
    try:
        with pytest.raises(SandboxUnavailable, match="all 1 sandboxes this bot may run"):
            await provider.create(SandboxSpec(session_key="second"))
    finally:
        await first.destroy()
        await provider.close()
    assert [p.name for p in sandbox_root.glob("lcl-*")] == []


# -- the disk quota, when no call is running and where the sandbox writes --

# The thread waits a moment, so that its cell has surely returned (on a busy machine the
# call can take longer than the writer needs to pass the quota) before it starts writing.
WRITE_AFTER_RETURN = """
import os, threading, time
def fill():
    time.sleep(2)
    block = os.urandom(1 << 20)
    os.makedirs('/buddy/work/fill', exist_ok=True)
    for i in range(256):
        with open(f'/buddy/work/fill/{i}.bin', 'wb') as f:
            f.write(block)
    open('/buddy/work/finished', 'w').close()
threading.Thread(target=fill).start()
print('returned')
"""


async def test_a_thread_left_writing_after_its_cell_returned_is_stopped(
    sandbox_root: Path,
) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(disk_bytes=32 << 20))
    home = sandbox_root / sandbox.id
    try:
        cell = await sandbox.run_code("python", WRITE_AFTER_RETURN, 30)
        assert cell.status == "ok" and cell.stdout.text == "returned\n"
        # The writer either finishes (no quota between calls) or dies with the kernel.
        gone = lambda: (home / "work/finished").exists() or not survivors([home])  # noqa: E731
        assert await eventually(gone, within=120)
        held = used_bytes([home])
        after = await sandbox.run_code("python", "print('next')", 30)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert not (home / "work/finished").exists()
    assert held < (32 << 20) + (128 << 20)
    assert after.stdout.text == "next\n" and "Since the last call" in after.note, after
    assert "disk quota" in after.note


async def test_a_loop_making_empty_files_is_stopped_at_the_file_cap(sandbox_root: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(max_files=1000))
    try:
        code = "mkdir many && cd many && for i in $(seq 100000); do : > f$i; done; echo made"
        result = await sandbox.run_code("bash", code, 120)
        left = await _bash(sandbox, "ls many | wc -l")
    finally:
        await sandbox.destroy()
        await provider.close()
    assert result.status == "killed" and "1,000 files" in result.note
    assert int(left) < 100000


@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm"])
async def test_scratch_folders_count_against_the_quota(sandbox_root: Path, folder: str) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(disk_bytes=16 << 20))
    try:
        code = (
            "import os\nblock = os.urandom(1 << 20)\nfor i in range(96):\n"
            f"    with open('{folder}/f%d' % i, 'wb') as f:\n        f.write(block)\n"
            "print('wrote all')"
        )
        result = await sandbox.run_code("python", code, 60)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert result.status == "killed" and "disk quota" in result.note
    assert "wrote all" not in result.stdout.text


# -- limits the kernel cannot lift --

RAISE_AND_SPIN = {
    "self": "while time.process_time() < 60:\n    pass\n",
    "child": (
        "import subprocess\n"
        "subprocess.run(['python3', '-c', 'import time\\nwhile time.process_time() < 60: pass'])\n"
    ),
}


@pytest.mark.parametrize("spinner", sorted(RAISE_AND_SPIN))
async def test_a_cell_that_lifts_its_cpu_limit_is_still_stopped(
    sandbox_root: Path, spinner: str
) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(cpu_s=2))
    code = (
        "import resource, time\n"
        "inf = resource.RLIM_INFINITY\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (inf, inf))\n"
        "print('lifted', resource.getrlimit(resource.RLIMIT_CPU), flush=True)\n"
        f"{RAISE_AND_SPIN[spinner]}print('spun to the end')\n"
    )
    try:
        result = await sandbox.run_code("python", code, 300)
        after = await sandbox.run_code("python", "print('usable')", 30)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert "lifted (-1, -1)" in result.stdout.text  # the attack itself worked
    assert "spun to the end" not in result.stdout.text
    assert result.status == "killed" and "CPU time" in result.kernel_note
    assert after.stdout.text == "usable\n" and after.kernel == "fresh"


# -- the kernel's channel to the bot --

FIND_CHANNEL = """
import gc, json, os, time
from sci_kernel_output import Frames
channel = next(o for o in gc.get_objects() if isinstance(o, Frames)).default
"""
FLOOD = (
    FIND_CHANNEL
    + """
line = (json.dumps({"t": "o", "d": "x" * 60000}) + "\\n").encode()
for _ in range(4000):  # 240 MB of frames that look like the kernel's own
    os.write(channel, line)
print("flooded")
"""
)


async def test_a_cell_flooding_the_kernel_channel_is_cut_off(sandbox_root: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(output_bytes=64 << 10))
    try:
        flood = await sandbox.run_code("python", FLOOD, 300)
        after = await sandbox.run_code("python", "print('usable')", 30)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert flood.status == "killed" and "flooded the kernel's channel" in flood.kernel_note
    assert len(flood.stdout.text) < 1 << 20  # capped like any output
    assert after.stdout.text == "usable\n" and after.kernel == "fresh"


OPEN_ALL_FILES = """
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = []
try:
    while len(fds) < 8000:
        fds.append(os.open('/dev/null', os.O_RDONLY))
except OSError:
    pass
print(len(fds))
"""


@pytest.mark.parametrize("language", ["python", "bash"])
async def test_open_files_are_capped_per_process(sandbox_root: Path, language: str) -> None:
    provider, sandbox = await _sandbox(sandbox_root)
    code = OPEN_ALL_FILES
    if language == "bash":  # a process of its own, not the kernel
        code = f"python3 - <<'PY'\n{OPEN_ALL_FILES}PY"
    try:
        result = await sandbox.run_code(language, code, 60)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert int(result.stdout.text) < 1024  # Limits().open_files, not the host's hard limit


async def test_a_free_slot_is_taken_at_once_even_without_waiting(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root, max_sandboxes=1, wait_s=0)
    sandbox = await provider.create(SandboxSpec(session_key="first"))
    try:
        assert provider.slots.waiting == []
    finally:
        await sandbox.destroy()
        await provider.close()


# -- memory of the sandbox as a whole --

MEMFD_HOARD = """
import os
block = b"m" * (1 << 20)
fds = [os.memfd_create(f"hoard{n}") for n in range(3)]
for fd in fds:  # no mapping, so no RLIMIT_DATA or RLIMIT_AS counts these pages
    for _ in range(256):
        os.write(fd, block)
print("held 768 MB", flush=True)
"""


@pytest.mark.skipif(cgroups.memory_parent() is None, reason="no memory cgroup on this host")
async def test_ram_backed_files_count_against_the_sandboxs_memory(sandbox_root: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(sandbox_memory_bytes=256 << 20))
    try:
        result = await sandbox.run_code("python", MEMFD_HOARD, 120)
        after = await sandbox.run_code("python", "print('usable')", 30)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert "held 768 MB" not in result.stdout.text
    assert result.status in ("killed", "error")
    assert after.stdout.text == "usable\n"
    assert sandbox.cgroup is not None and not sandbox.cgroup.exists()  # removed with it
