"""Hostile snippets against the local sandbox: each is contained, and the next call works.
Tests marked BOTH_PYTHONS run Python both in the sandbox's kernel and as a process per call.
"""

from __future__ import annotations

import asyncio
import os
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from bot.errors import SandboxError, SandboxPathError
from bot.sandbox.base import DATA_DIR, WORK_DIR, SandboxSpec
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalProvider, LocalSandbox
from tests.support import local_provider_at

SECRET = "sk-test-secret"
MakeSandbox = Callable[..., Awaitable[LocalSandbox]]
BOTH_PYTHONS = pytest.mark.parametrize("python_kernel", [True, False], ids=["kernel", "process"])


@pytest.fixture
def python_kernel() -> bool:
    """Whether Python runs in the kernel (the default); BOTH_PYTHONS tries both ways."""
    return True


@pytest.fixture
async def local_sandbox(sandbox_root: Path, python_kernel: bool) -> AsyncIterator[LocalSandbox]:
    provider = local_provider_at(sandbox_root, python_kernel=python_kernel)
    sandbox = await provider.create(SandboxSpec(session_key="hostile"))
    yield sandbox
    await sandbox.destroy()
    await provider.close()


@pytest.fixture
async def make_sandbox(sandbox_root: Path, python_kernel: bool) -> AsyncIterator[MakeSandbox]:
    """Sandboxes from a provider with the given limits; all destroyed afterwards."""
    providers: list[LocalProvider] = []
    sandboxes: list[LocalSandbox] = []

    async def make(**limits: object) -> LocalSandbox:
        provider = local_provider_at(
            sandbox_root,
            Limits(**limits),  # type: ignore[arg-type]
            python_kernel=python_kernel,
        )
        providers.append(provider)
        sandboxes.append(await provider.create(SandboxSpec(session_key="hostile")))
        return sandboxes[-1]

    yield make
    for sandbox in sandboxes:
        await sandbox.destroy()
    for provider in providers:
        await provider.close()


async def still_works(sandbox: LocalSandbox) -> None:
    result = await sandbox.run_code("python", "print('still fine')", timeout_s=10)
    assert (result.status, result.stdout.text) == ("ok", "still fine\n"), result


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


def host_processes_with(token: str) -> list[str]:
    """Command lines of host processes that mention `token`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if token in cmdline and "pytest" not in cmdline:
            found.append(cmdline)
    return found


@BOTH_PYTHONS
async def test_bot_environment_is_invisible(
    monkeypatch: pytest.MonkeyPatch, sandbox_root: Path, python_kernel: bool
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-" + SECRET)
    provider = local_provider_at(sandbox_root, python_kernel=python_kernel)
    sandbox = await provider.create(SandboxSpec(session_key="s"))
    code = (
        "import os, glob\n"
        "print(sorted(os.environ))\n"
        "for path in glob.glob('/proc/*/environ'):\n"
        "    try: print(path, open(path, 'rb').read())\n"
        "    except OSError as e: print(path, e)\n"
    )
    try:
        result = await sandbox.run_code("python", code, timeout_s=10)
        assert result.status == "ok", result
        assert SECRET not in result.stdout.text + result.stderr.text
        assert "ANTHROPIC" not in result.stdout.text
        assert "/proc/1/environ b'PATH=" in result.stdout.text  # bwrap's own: PATH only
        names = eval(result.stdout.text.splitlines()[0])
        assert {"PATH", "HOME", "LANG", "TMPDIR", "MPLBACKEND", "PYTHONUNBUFFERED"} <= set(names)
        await still_works(sandbox)
    finally:
        await sandbox.destroy()


@BOTH_PYTHONS
@pytest.mark.parametrize(
    "path",
    [
        "/root",
        "/root/.bashrc",
        "/work/main/bot/errors.py",
        "/work/main/.venv",
        __file__,
        "/etc/shadow",
        "/etc/pip.conf",
        "/home",
    ],
)
async def test_host_files_are_invisible(local_sandbox: LocalSandbox, path: str) -> None:
    code = f"import os\nprint(os.path.lexists({path!r}))\nopen({path!r}).read()"
    result = await local_sandbox.run_code("python", code, timeout_s=10)
    assert result.stdout.text == "False\n"
    assert result.status == "error"
    assert "FileNotFoundError" in result.stderr.text
    await still_works(local_sandbox)


async def test_only_the_sandbox_python_is_reachable(local_sandbox: LocalSandbox) -> None:
    code = "ls -d /root/.pyenv /work /opt /srv /mnt 2>&1; command -v python3; ls /etc | wc -l"
    result = await local_sandbox.run_code("bash", code, timeout_s=10)
    assert result.stdout.text.count("No such file or directory") == 5
    assert "/usr/bin/python3" in result.stdout.text
    assert int(result.stdout.text.split()[-1]) < 40  # a handful of /etc entries, not all


@pytest.mark.parametrize(
    "target",
    ["/usr/evil", "/usr/bin/python3", f"{DATA_DIR}/evil", "/etc/evil", "/etc/passwd", "/evil"],
)
async def test_writes_outside_work_fail(local_sandbox: LocalSandbox, target: str) -> None:
    result = await local_sandbox.run_code("bash", f"echo pwned >> {target}", timeout_s=10)
    assert result.status == "error"
    assert (
        "Read-only file system" in result.stderr.text or "Permission denied" in result.stderr.text
    )
    assert not Path("/usr/evil").exists() and not Path("/evil").exists()
    await still_works(local_sandbox)


async def test_tmp_is_writable_but_private_and_fresh(local_sandbox: LocalSandbox) -> None:
    marker = f"/tmp/sandbox-marker-{os.getpid()}"
    first = await local_sandbox.run_code("bash", f"echo hi > {marker} && cat {marker}", 10)
    assert first.stdout.text == "hi\n"
    assert not Path(marker).exists()  # not the host's /tmp
    second = await local_sandbox.run_code("bash", f"ls {marker}", timeout_s=10)
    assert second.status == "error"  # a new /tmp for every call


@BOTH_PYTHONS
async def test_network_is_unreachable(local_sandbox: LocalSandbox) -> None:
    connections = 0

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = (
        "import socket\n"
        f"for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 443), ('1.1.1.1', 53)]:\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=5)\n"
        "        print(host, 'CONNECTED')\n"
        "    except OSError as e:\n"
        "        print(host, type(e).__name__, e.errno)\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 443)\n"
        "    print('DNS OK')\n"
        "except OSError as e:\n"
        "    print('dns', type(e).__name__)\n"
    )
    try:
        result = await local_sandbox.run_code("python", code, timeout_s=10)
    finally:
        server.close()
        await server.wait_closed()
    assert "CONNECTED" not in result.stdout.text
    assert "DNS OK" not in result.stdout.text
    assert "127.0.0.1 ConnectionRefusedError" in result.stdout.text
    # network unreachable at once (errno 101), not a connect left hanging to time out
    assert result.stdout.text.count("1.1.1.1 OSError 101") == 2
    assert connections == 0
    await still_works(local_sandbox)


def processes_of(sandbox: LocalSandbox, *tokens: str) -> list[str]:
    """Command lines of `sandbox`'s processes mentioning one of `tokens`: as root each
    sandbox has a uid of its own (other suites on the machine run snippets too)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        mine = sandbox.uid is None or f"\nUid:\t{sandbox.uid}\t" in status
        if mine and any(t in cmdline for t in tokens) and "pytest" not in cmdline:
            found.append(cmdline)
    return found


def host_processes_of_uid(uid: int) -> int:
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        count += f"\nUid:\t{uid}\t" in status
    return count


async def eventually(check: Callable[[], bool], within: float = 5.0) -> bool:
    """Whether `check` holds within `within` seconds: killed processes take a moment to be
    reaped by the host's init, and until then they still show in /proc."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def test_bash_fork_bomb_is_contained(local_sandbox: LocalSandbox) -> None:
    # The classic form returns at once: the snippet's end tears the namespace down. Its exit
    # status is the last fork's: an error when that fork met the process limit (a busy host).
    quick = await local_sandbox.run_code("bash", ":(){ :|:& };:", timeout_s=60)
    assert quick.status in ("ok", "error"), quick
    leftover = lambda: processes_of(local_sandbox, "/buddy/.run/main.sh")  # noqa: E731
    assert await eventually(lambda: leftover() == []), leftover()

    # Kept alive, it runs into RLIMIT_NPROC until the wall-clock timeout kills everything.
    uid = local_sandbox.uid if local_sandbox.uid is not None else os.getuid()
    baseline = host_processes_of_uid(uid)  # other host processes of that uid, if any
    started = time.monotonic()
    task = asyncio.create_task(local_sandbox.run_code("bash", ":(){ :|:& };:; sleep 300", 3))
    await asyncio.sleep(1.5)
    if os.geteuid() == 0:
        assert host_processes_of_uid(uid) <= Limits().processes
    result = await task
    assert result.status == "timeout"
    assert time.monotonic() - started < 150  # the time limit, not the sleep, ended it
    assert await eventually(lambda: leftover() == []), leftover()
    assert await eventually(lambda: host_processes_of_uid(uid) <= baseline)
    await still_works(local_sandbox)


@BOTH_PYTHONS
async def test_python_fork_loop_hits_the_process_limit(local_sandbox: LocalSandbox) -> None:
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print(n, e.errno)\n"
    )
    result = await local_sandbox.run_code("python", code, timeout_s=20)
    forks, errno = map(int, result.stdout.text.split())
    assert errno == 11  # EAGAIN from RLIMIT_NPROC
    assert 0 < forks < Limits().processes
    await still_works(local_sandbox)


@BOTH_PYTHONS
async def test_allocating_8_gb_fails_cleanly(local_sandbox: LocalSandbox) -> None:
    result = await local_sandbox.run_code("python", "b = bytearray(8 << 30)", timeout_s=20)
    assert result.status == "error"
    assert "MemoryError" in result.stderr.text
    node = await local_sandbox.run_code(
        "node", "try { Buffer.alloc(2 ** 32) } catch (e) { console.log(e.name) }", timeout_s=20
    )
    assert node.stdout.text == "RangeError\n"
    await still_works(local_sandbox)


async def test_node_and_webassembly_work_under_the_memory_limit(local_sandbox: LocalSandbox):
    code = (
        "new WebAssembly.Memory({initial: 10});"
        "const b = Buffer.alloc(1 << 30); console.log(b.length)"
    )
    result = await local_sandbox.run_code("node", code, timeout_s=20)
    assert (result.status, result.stdout.text) == ("ok", f"{1 << 30}\n"), result


@BOTH_PYTHONS
async def test_printing_50_mb_is_captured_in_bounded_memory(local_sandbox: LocalSandbox) -> None:
    code = "import sys\nfor _ in range(50):\n    sys.stdout.write('x' * (1 << 20))\n"
    tracemalloc.start()
    try:
        result = await local_sandbox.run_code("python", code, timeout_s=30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status == "ok"
    assert result.stdout.cut_bytes == (50 << 20) - Limits().output_bytes
    assert len(result.stdout.text) < Limits().output_bytes + 100
    assert peak < 8 << 20  # the bot never held the 50 MB
    assert result.duration_s < 10
    await still_works(local_sandbox)


async def test_timeout_kills_the_whole_tree(local_sandbox: LocalSandbox) -> None:
    code = "(sleep 0.6; touch /buddy/work/survivor) &\nsleep 1000.25 &\necho started\nsleep 30\n"
    started = time.monotonic()
    result = await local_sandbox.run_code("bash", code, timeout_s=2)
    elapsed = time.monotonic() - started
    assert result.status == "timeout"
    assert result.exit_code is None
    assert result.stdout.text == "started\n"
    assert 1.9 < elapsed < 25  # the 2 s limit ended it, not the 30 s sleep
    assert host_processes_with("sleep 1000.25") == []
    await asyncio.sleep(0.2)
    names = {entry.name for entry in await local_sandbox.list_dir(WORK_DIR)}
    assert "survivor" in names  # written before the timeout: files persist

    second = await local_sandbox.run_code(
        "bash", "(sleep 0.51; touch /buddy/work/late) & sleep 30", timeout_s=0.2
    )
    assert second.status == "timeout"
    # nothing of that call is left that could write `late` later
    snippet = lambda: processes_of(local_sandbox, "/buddy/.run/main.sh", "sleep 0.51")  # noqa: E731
    assert await eventually(lambda: snippet() == []), snippet()
    assert "late" not in {entry.name for entry in await local_sandbox.list_dir(WORK_DIR)}
    await still_works(local_sandbox)


async def test_background_children_die_when_the_snippet_ends(local_sandbox: LocalSandbox):
    result = await local_sandbox.run_code("bash", "sleep 1000.5 & echo done", timeout_s=10)
    assert (result.status, result.stdout.text) == ("ok", "done\n")
    assert host_processes_with("sleep 1000.5") == []


@BOTH_PYTHONS
async def test_cpu_limit_stops_a_busy_loop(make_sandbox: MakeSandbox) -> None:
    sandbox = await make_sandbox(cpu_s=1)
    result = await sandbox.run_code("python", "while True: pass", timeout_s=20)
    assert result.status == "killed"
    assert result.duration_s < 8
    await still_works(sandbox)


@BOTH_PYTHONS
async def test_file_size_limit(make_sandbox: MakeSandbox) -> None:
    sandbox = await make_sandbox(file_size_bytes=1 << 20)
    shell = await sandbox.run_code("bash", "head -c 2M /dev/zero > big", timeout_s=10)
    assert shell.status == "killed"  # SIGXFSZ
    py = await sandbox.run_code("python", "open('big2', 'wb').write(bytes(2 << 20))", 10)
    assert py.status == "error"
    assert "File too large" in py.stderr.text
    with pytest.raises(SandboxError, match="file size limit"):
        await sandbox.upload(f"{WORK_DIR}/big3", chunks(bytes(2 << 20)))
    await still_works(sandbox)


@BOTH_PYTHONS
async def test_only_the_sandbox_processes_are_visible(local_sandbox: LocalSandbox) -> None:
    code = (
        "import os\n"
        "for pid in sorted(p for p in os.listdir('/proc') if p.isdigit()):\n"
        "    print(pid, open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')[0].decode())\n"
    )
    result = await local_sandbox.run_code("python", code, timeout_s=10)
    lines = result.stdout.text.splitlines()
    assert len(lines) <= 3, lines  # bwrap's init and the snippet
    assert "pytest" not in result.stdout.text
    assert any("python3" in line for line in lines)


async def test_no_nested_namespaces_or_privileges(local_sandbox: LocalSandbox) -> None:
    code = "unshare -U true && echo NESTED; grep CapEff /proc/self/status; id -u"
    result = await local_sandbox.run_code("bash", code, timeout_s=10)
    assert "NESTED" not in result.stdout.text
    assert "CapEff:\t0000000000000000" in result.stdout.text
    assert result.stdout.text.endswith("1000\n")


async def test_sandbox_runs_as_an_unprivileged_host_uid(
    local_sandbox: LocalSandbox, sandbox_root: Path
) -> None:
    # As root each sandbox switches to a uid of its own (RLIMIT_NPROC does not bind uid 0).
    expected = local_sandbox.uid if os.geteuid() == 0 else os.getuid()
    assert expected not in (None, 0)
    await local_sandbox.run_code("bash", "echo x > owned.txt", timeout_s=10)
    assert (sandbox_root / local_sandbox.id / "work" / "owned.txt").stat().st_uid == expected


async def test_symlinks_to_host_files_do_not_leak(local_sandbox: LocalSandbox) -> None:
    setup = (
        "ln -s /etc/shadow shadow; ln -s /root rootdir; ln -s /work/main/bot botdir; "
        f"ln -s {__file__} testfile; ln -s / slash; ln -s /root/planted planted"
    )
    assert (await local_sandbox.run_code("bash", setup, timeout_s=10)).status == "ok"

    for name in ("shadow", "testfile", "botdir/errors.py", "rootdir/.bashrc"):
        with pytest.raises(SandboxPathError, match="does not exist"):
            _ = [chunk async for chunk in local_sandbox.download(f"{WORK_DIR}/{name}")]
    for name in ("rootdir", "botdir"):
        with pytest.raises(SandboxPathError):
            await local_sandbox.list_dir(f"{WORK_DIR}/{name}")

    # "/" inside is the sandbox's own root: its passwd is the generated one.
    passwd = b"".join([c async for c in local_sandbox.download(f"{WORK_DIR}/slash/etc/passwd")])
    assert passwd != Path("/etc/passwd").read_bytes()
    assert b"sandbox:x:1000" in passwd

    for target in ("planted", "rootdir/planted", "botdir/planted.py"):
        with pytest.raises(SandboxError):
            await local_sandbox.upload(f"{WORK_DIR}/{target}", chunks(b"pwned"))
    assert not Path("/root/planted").exists()
    assert not Path("/work/main/bot/planted.py").exists()
    await still_works(local_sandbox)


# -- the kernel --


async def test_processes_a_cell_leaves_running_die_with_the_sandbox(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root)
    sandbox = await provider.create(SandboxSpec(session_key="kernel"))
    code = "import subprocess\nsubprocess.Popen(['sleep', '1000.75']);"
    try:
        assert (await sandbox.run_code("python", code, timeout_s=10)).status == "ok"
        assert len(host_processes_with("sleep 1000.75")) == 1  # as in a notebook: it lives on
    finally:
        await sandbox.destroy()
        await provider.close()
    assert await eventually(lambda: host_processes_with("sleep 1000.75") == [])


async def test_the_kernel_grants_each_cell_its_cpu_time(make_sandbox: MakeSandbox) -> None:
    sandbox = await make_sandbox(cpu_s=1)
    burn = "import time\nend = time.process_time() + 0.7\nwhile time.process_time() < end: pass"
    for _ in range(3):  # 2.1 s of CPU in all: past the limit only if it counted the kernel's life
        result = await sandbox.run_code("python", burn, timeout_s=20)
        assert result.status == "ok", result
    assert result.kernel == "kept"
