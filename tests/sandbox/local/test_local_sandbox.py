"""The local bubblewrap backend: running code, files, detached commands, git, lifecycle."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import NamedTuple

import pytest

from bot.compose import build_provider
from bot.errors import SandboxError, SandboxPathError, SandboxUnavailable
from bot.sandbox.base import (
    DATA_DIR,
    OUT_DIR,
    UPLOADS_DIR,
    WORK_DIR,
    FileEntry,
    Sandbox,
    SandboxProvider,
    SandboxSpec,
)
from bot.sandbox.limits import Limits
from bot.sandbox.local import LocalProvider, LocalSandbox, require_bubblewrap
from bot.sandbox.local.bwrap import kill_containers_of
from bot.sandbox.output import CappedBuffer
from tests.support import WORKER_UID_BASE, local_provider_at, settings_for


async def chunked(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def read_all(sandbox: LocalSandbox, path: str) -> bytes:
    return b"".join([chunk async for chunk in sandbox.download(path)])


# -- CappedBuffer --


def test_capped_buffer_keeps_everything_under_the_limit() -> None:
    buffer = CappedBuffer(10)
    buffer.write(b"hello")
    buffer.write(b"")
    buffer.write(b"world")
    assert buffer.output().text == "helloworld"
    assert buffer.output().cut_bytes == 0


def test_capped_buffer_keeps_head_and_tail_and_counts_the_cut() -> None:
    buffer = CappedBuffer(8)
    for _ in range(1000):
        buffer.write(b"0123456789")
    buffer.write(b"END!")
    out = buffer.output()
    assert out.text.startswith("0123")
    assert out.text.endswith("END!")
    assert "[... 9996 bytes cut ...]" in out.text
    assert out.cut_bytes == 10_004 - 8


def test_capped_buffer_never_splits_a_character() -> None:
    buffer = CappedBuffer(8)
    data = ("aaaé" + "€" * 20 + "zzé").encode()
    buffer.write(data)
    out = buffer.output()
    assert "\ufffd" not in out.text
    head, tail = out.text.split("[...")[0].strip(), out.text.split("...]")[1].strip()
    assert head == "aaa"  # "é" straddled the cut point
    assert tail == "zzé"
    assert out.cut_bytes == len(data) - len(b"aaa") - len("zzé".encode())


def test_capped_buffer_replaces_invalid_utf8() -> None:
    buffer = CappedBuffer(100)
    buffer.write(b"ok \xff\xfe done")
    assert buffer.output().text == "ok \ufffd\ufffd done"


# -- bubblewrap presence --


def test_require_bubblewrap_explains_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sandbox_root: Path
) -> None:
    assert Path(require_bubblewrap()).name == "bwrap"
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap"):
        require_bubblewrap(path=str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"bubblewrap \(bwrap\) is not installed"):
        local_provider_at(sandbox_root)


def test_provider_refuses_a_root_the_sandbox_user_cannot_reach(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only when running as root does the sandbox switch to another uid")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o700)
    with pytest.raises(SandboxUnavailable, match=r"cannot reach .*chmod o\+x"):
        local_provider_at(locked / "sandboxes")


async def test_the_uid_base_setting_picks_the_sandboxes_uids(sandbox_root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only when running as root does each sandbox get a uid of its own")
    base = WORKER_UID_BASE + 500  # this worker's range, apart from its other tests' sandboxes
    provider = build_provider(
        settings_for("http://127.0.0.1:9", sandbox_root, sandbox_uid_base=base)
    )
    try:
        sandbox = await provider.create(SandboxSpec(session_key="uids"))
        # the host uid is the work folder's owner (inside, the sandbox sees its own uid map)
        assert (sandbox_root / sandbox.id / "work").stat().st_uid == base
    finally:
        await provider.close()


def test_provider_refuses_to_run_sandboxes_as_root(sandbox_root: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="must not run as root"):
        local_provider_at(sandbox_root, sandbox_uid=0)


# -- running code --


async def test_implements_the_protocols(local_provider: LocalProvider, local_sandbox: LocalSandbox):
    assert isinstance(local_provider, SandboxProvider)
    assert isinstance(local_sandbox, Sandbox)
    assert local_sandbox.id.startswith("lcl-")


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "print('hello from python')"),
        ("bash", "echo hello from bash"),
        ("node", "console.log('hello from node')"),
    ],
)
async def test_hello_in_each_language(local_sandbox: LocalSandbox, language, code) -> None:
    result = await local_sandbox.run_code(language, code, timeout_s=10)
    assert result.status == "ok", result
    assert result.exit_code == 0
    assert result.stdout.text == f"hello from {language}\n"
    assert result.stderr.text == ""
    assert result.duration_s < 5


async def test_python_is_the_system_python(local_sandbox: LocalSandbox) -> None:
    code = "import sys, os; print(sys.executable, sys.prefix, os.getcwd(), os.getuid())"
    result = await local_sandbox.run_code("python", code, timeout_s=10)
    assert result.stdout.text.split() == ["/usr/bin/python3", "/usr", WORK_DIR, "1000"]


async def test_code_is_passed_verbatim(local_sandbox: LocalSandbox) -> None:
    tricky = 'it\'s "quoted" $HOME `id` \\n ; rm -rf / é'
    result = await local_sandbox.run_code("python", f"print({tricky!r})", timeout_s=10)
    assert result.stdout.text == tricky + "\n"


async def test_nonzero_exit_is_an_error_result(local_sandbox: LocalSandbox) -> None:
    result = await local_sandbox.run_code("bash", "echo out; echo oops >&2; exit 3", timeout_s=10)
    assert result.status == "error"
    assert result.exit_code == 3
    assert result.stdout.text == "out\n"
    assert result.stderr.text == "oops\n"


async def test_python_exception_reaches_stderr(local_sandbox: LocalSandbox) -> None:
    result = await local_sandbox.run_code("python", "raise ValueError('bad input')", timeout_s=10)
    assert result.status == "error"
    assert result.exit_code == 1
    assert "ValueError: bad input" in result.stderr.text


async def test_missing_interpreter_is_a_clear_result(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root, interpreters={"node": "no-such-node-binary"})
    sandbox = await provider.create(SandboxSpec(session_key="s"))
    try:
        result = await sandbox.run_code("node", "console.log(1)", timeout_s=10)
        assert (result.status, result.exit_code) == ("error", 127)
        assert result.stderr.text == "node is not installed in this sandbox\n"
        other = await sandbox.run_code("ruby", "puts 1", timeout_s=10)  # type: ignore[arg-type]
        assert other.exit_code == 127
        assert "ruby is not a supported language" in other.stderr.text
    finally:
        await sandbox.destroy()


async def test_work_folder_persists_between_calls(local_sandbox: LocalSandbox) -> None:
    await local_sandbox.run_code("bash", "echo 42 > state.txt; mkdir -p out/deep", timeout_s=10)
    result = await local_sandbox.run_code(
        "python", "print(open('/buddy/work/state.txt').read().strip())", timeout_s=10
    )
    assert result.stdout.text == "42\n"


async def test_layout_folders_exist(local_sandbox: LocalSandbox) -> None:
    names = {entry.name: entry.kind for entry in await local_sandbox.list_dir(WORK_DIR)}
    assert names[Path(UPLOADS_DIR).name] == "dir"
    assert names[Path(OUT_DIR).name] == "dir"
    assert await local_sandbox.list_dir(DATA_DIR) == []


async def test_output_cap_keeps_head_and_tail(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root, Limits(output_bytes=1 << 20))
    sandbox = await provider.create(SandboxSpec(session_key="s"))
    code = (
        "import sys\n"
        "sys.stdout.write('HEAD' + 'x' * (5_000_000 - 8) + 'TAIL')\n"
        "sys.stderr.write('e' * 10);\n"  # the semicolon: no display of the last value
    )
    try:
        result = await sandbox.run_code("python", code, timeout_s=20)
    finally:
        await sandbox.destroy()
    assert result.status == "ok"
    assert result.stdout.text.startswith("HEADxxx")
    assert result.stdout.text.endswith("xxxTAIL")
    assert result.stdout.cut_bytes == 5_000_000 - (1 << 20)
    assert f"[... {5_000_000 - (1 << 20)} bytes cut ...]" in result.stdout.text
    assert result.stderr.text == "e" * 10
    assert result.stderr.cut_bytes == 0


async def test_runs_in_parallel(local_sandbox: LocalSandbox) -> None:
    # bash snippets are processes of their own (Python cells share the kernel, one at a time)
    codes = [f"sleep 0.5; echo {i}" for i in range(4)]
    started = asyncio.get_running_loop().time()
    results = await asyncio.gather(*(local_sandbox.run_code("bash", c, 10) for c in codes))
    assert [r.stdout.text for r in results] == ["0\n", "1\n", "2\n", "3\n"]
    assert asyncio.get_running_loop().time() - started < 2.5


# -- files --


async def test_upload_streams_chunks_then_code_and_download_read_it(
    local_sandbox: LocalSandbox,
) -> None:
    payload = os.urandom(1 << 20) * 20  # 20 MiB
    path = f"{UPLOADS_DIR}/big.bin"
    written = await local_sandbox.upload(path, chunked(payload, 64 << 10))
    assert written == len(payload)

    code = f"import hashlib; print(hashlib.sha256(open({path!r}, 'rb').read()).hexdigest())"
    result = await local_sandbox.run_code("python", code, timeout_s=20)
    assert result.stdout.text.strip() == hashlib.sha256(payload).hexdigest()

    chunks = [chunk async for chunk in local_sandbox.download(path)]
    assert len(chunks) > 1  # streamed, not read whole
    assert b"".join(chunks) == payload


async def test_upload_creates_parent_folders_and_overwrites(local_sandbox: LocalSandbox) -> None:
    path = f"{WORK_DIR}/a/b/c.txt"
    assert await local_sandbox.upload(path, chunked(b"first version", 4)) == 13
    assert await local_sandbox.upload(path, chunked(b"second", 4)) == 6
    assert await read_all(local_sandbox, path) == b"second"
    assert await local_sandbox.upload(f"{WORK_DIR}/empty", chunked(b"", 4)) == 0
    assert await read_all(local_sandbox, f"{WORK_DIR}/empty") == b""


@pytest.mark.parametrize(
    "path",
    [
        "relative.txt",
        "/etc/passwd",
        f"{DATA_DIR}/x",
        f"{WORK_DIR}/../data/x",
        "/buddy/workx",
        WORK_DIR,
    ],
)
async def test_upload_rejects_paths_outside_work(local_sandbox: LocalSandbox, path: str) -> None:
    with pytest.raises(SandboxPathError):
        await local_sandbox.upload(path, chunked(b"x", 1))


@pytest.mark.parametrize("path", ["/", "/etc/passwd", f"{WORK_DIR}/../../etc/passwd", "x"])
async def test_reads_reject_paths_outside_the_layout(local_sandbox: LocalSandbox, path: str):
    with pytest.raises(SandboxPathError):
        await read_all(local_sandbox, path)
    with pytest.raises(SandboxPathError):
        await local_sandbox.list_dir(path)


async def test_download_missing_file_or_folder_is_a_path_error(local_sandbox: LocalSandbox):
    with pytest.raises(SandboxPathError, match="does not exist"):
        await read_all(local_sandbox, f"{WORK_DIR}/nope.csv")
    with pytest.raises(SandboxPathError, match="not a regular file"):
        await read_all(local_sandbox, OUT_DIR)
    with pytest.raises(SandboxPathError, match="does not exist"):
        await local_sandbox.list_dir(f"{WORK_DIR}/nope")
    await local_sandbox.upload(f"{WORK_DIR}/f", chunked(b"x", 1))
    with pytest.raises(SandboxPathError, match="not a folder"):
        await local_sandbox.list_dir(f"{WORK_DIR}/f")


async def test_list_dir_reports_kinds_and_sizes(local_sandbox: LocalSandbox) -> None:
    setup = (
        "mkdir -p out/sub && printf 12345 > out/five.txt && ln -s five.txt out/link "
        "&& mkfifo out/pipe && printf x > 'out/odd name\ttab'"
    )
    result = await local_sandbox.run_code("bash", setup, timeout_s=10)
    assert result.status == "ok", result
    entries = await local_sandbox.list_dir(OUT_DIR)
    by_name = {entry.name: entry for entry in entries}
    assert [entry.name for entry in entries] == sorted(by_name)
    assert by_name["five.txt"] == FileEntry("five.txt", "file", 5)
    assert by_name["sub"].kind == "dir"
    assert by_name["link"].kind == "link"
    assert by_name["pipe"].kind == "other"
    assert by_name["odd name\ttab"] == FileEntry("odd name\ttab", "file", 1)


# -- detached commands --


async def test_detached_command_runs_in_background_and_finishes(local_sandbox: LocalSandbox):
    # it waits for a go-ahead file, so the test sees it running for as long as it needs
    waits = "import os, time\nprint('begin', flush=True)\n"
    waits += "while not os.path.exists('/buddy/work/go'):\n    time.sleep(0.02)\nprint('end')"
    command_id = await local_sandbox.start_command("python", waits)
    for _ in range(500):
        state = await local_sandbox.command_state(command_id)
        if state.result.stdout.text or not state.running:
            break
        await asyncio.sleep(0.02)
    assert state.running
    assert state.result.exit_code is None
    assert state.result.stdout.text == "begin\n"

    # Other calls keep working while it runs.
    other = await local_sandbox.run_code("bash", "echo meanwhile; touch go", timeout_s=10)
    assert other.stdout.text == "meanwhile\n"

    for _ in range(50):
        state = await local_sandbox.command_state(command_id)
        if not state.running:
            break
        await asyncio.sleep(0.1)
    assert not state.running
    assert (state.result.status, state.result.exit_code) == ("ok", 0)
    assert state.result.stdout.text == "begin\nend\n"


async def test_waiting_on_a_detached_command_returns_when_it_ends(
    local_sandbox: LocalSandbox,
) -> None:
    command_id = await local_sandbox.start_command("bash", "sleep 0.5; echo done")
    state = await local_sandbox.command_state(command_id, wait_s=60)
    assert not state.running
    assert (state.result.status, state.result.stdout.text) == ("ok", "done\n")


async def test_a_wait_ends_after_wait_s_with_the_output_so_far(
    local_sandbox: LocalSandbox,
) -> None:
    command_id = await local_sandbox.start_command("bash", "echo begin; sleep 1000")
    state = await local_sandbox.command_state(command_id, wait_s=0.5)
    assert state.running and state.result.stdout.text == "begin\n"
    # A cancelled wait (Stop, Ctrl-C) ends at once and leaves the command running.
    waiting = asyncio.create_task(local_sandbox.command_state(command_id, wait_s=600))
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (await local_sandbox.command_state(command_id)).running
    await local_sandbox.kill_command(command_id)


async def test_detached_command_can_be_killed(local_sandbox: LocalSandbox) -> None:
    command_id = await local_sandbox.start_command("bash", "echo started; sleep 1000 & sleep 1000")
    await asyncio.sleep(0.3)
    assert (await local_sandbox.command_state(command_id)).running
    await local_sandbox.kill_command(command_id)
    state = await local_sandbox.command_state(command_id)
    assert not state.running
    assert state.result.status == "killed"
    assert state.result.stdout.text == "started\n"
    await local_sandbox.kill_command(command_id)  # killing twice is harmless


async def test_unknown_command_id_is_an_error(local_sandbox: LocalSandbox) -> None:
    with pytest.raises(SandboxError, match="no such command"):
        await local_sandbox.command_state("cmd-nope")
    with pytest.raises(SandboxError, match="no such command"):
        await local_sandbox.kill_command("cmd-nope")


async def test_close_kills_detached_commands(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root)
    sandbox = await provider.create(SandboxSpec(session_key="s"))
    command_id = await sandbox.start_command("bash", "sleep 1000")
    await provider.close()
    state = await sandbox.command_state(command_id)
    assert not state.running
    assert state.result.status == "killed"
    with pytest.raises(SandboxUnavailable, match="closed"):
        await provider.create(SandboxSpec(session_key="s"))
    await sandbox.destroy()


async def test_detached_command_has_a_wall_clock_cap(sandbox_root: Path) -> None:
    provider = local_provider_at(sandbox_root, Limits(command_max_s=0.5))
    sandbox = await provider.create(SandboxSpec(session_key="s"))
    try:
        command_id = await sandbox.start_command("bash", "sleep 1000")
        await asyncio.sleep(1.0)
        state = await sandbox.command_state(command_id)
        assert not state.running
        assert state.result.status == "timeout"
    finally:
        await sandbox.destroy()


# -- git checkout --


def make_bare_repo(tmp_path: Path) -> Path:
    git = shutil.which("git")
    assert git, "git is needed for the checkout tests"
    source, bare = tmp_path / "source", tmp_path / "repo.git"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    source.mkdir()
    (source / "README.md").write_text("# demo repo\n")
    (source / "data").mkdir()
    (source / "data" / "numbers.csv").write_text("n\n1\n2\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "first"]):
        subprocess.run([git, *args], cwd=source, env=env, check=True)
    subprocess.run([git, "clone", "-q", "--bare", str(source), str(bare)], env=env, check=True)
    return bare


async def test_repo_is_checked_out_read_only_into_data(sandbox_root: Path, tmp_path: Path):
    bare = make_bare_repo(tmp_path)
    provider = local_provider_at(sandbox_root, allowed_git_protocols=("file",))
    sandbox = await provider.create(SandboxSpec(session_key="s", repo_url=f"file://{bare}"))
    try:
        assert await read_all(sandbox, f"{DATA_DIR}/README.md") == b"# demo repo\n"
        names = {entry.name for entry in await sandbox.list_dir(DATA_DIR)}
        assert {"README.md", "data", ".git"} <= names
        code = (
            "cat /buddy/data/data/numbers.csv; git -C /buddy/data log --oneline | wc -l; "
            "touch /buddy/data/new; rm -f /buddy/data/README.md; echo x >> /buddy/data/README.md"
        )
        result = await sandbox.run_code("bash", code, timeout_s=10)
        assert result.stdout.text == "n\n1\n2\n1\n"  # one commit: a shallow clone
        assert result.stderr.text.count("Read-only file system") == 2  # touch, rm
        assert "README.md: Permission denied" in result.stderr.text
        assert await read_all(sandbox, f"{DATA_DIR}/README.md") == b"# demo repo\n"
    finally:
        await sandbox.destroy()


async def test_clone_failure_is_a_short_error_and_leaves_nothing(
    sandbox_root: Path, tmp_path: Path
) -> None:
    bare = make_bare_repo(tmp_path)
    # The default allows https only: a file:// URL is refused by git itself.
    provider = local_provider_at(sandbox_root)
    spec = SandboxSpec(session_key="s", repo_url=f"file://{bare}", tags=("t",))
    with pytest.raises(SandboxError, match=r"could not clone the repository: .*not allowed") as err:
        await provider.create(spec)
    assert "\n" not in str(err.value)
    assert await ids(provider, "t") == []
    assert list(sandbox_root.iterdir()) == []

    allowed = local_provider_at(sandbox_root, allowed_git_protocols=("file",))
    missing = SandboxSpec(session_key="s", repo_url=f"file://{tmp_path}/missing.git")
    with pytest.raises(SandboxError, match="could not clone the repository"):
        await allowed.create(missing)


def test_clone_error_hides_credentials() -> None:
    from bot.sandbox.local.git import _redact

    message = "fatal: unable to access 'https://user:ghp_secret@example.com/r.git/'"
    assert "ghp_secret" not in _redact(message)


# -- lifecycle --


async def ids(provider: LocalProvider, tag: str) -> list[str]:
    return [info.id for info in await provider.list_tagged(tag)]


async def test_list_tagged(local_provider: LocalProvider) -> None:
    a = await local_provider.create(SandboxSpec(session_key="a", tags=("bot", "x")))
    b = await local_provider.create(SandboxSpec(session_key="b", tags=("bot",)))
    c = await local_provider.create(SandboxSpec(session_key="c"))
    assert sorted(await ids(local_provider, "bot")) == sorted([a.id, b.id])
    assert await ids(local_provider, "x") == [a.id]
    assert await ids(local_provider, "none") == []
    ages = [time.time() - info.created_at for info in await local_provider.list_tagged("bot")]
    assert all(0 <= age < 60 for age in ages)
    for sandbox in (a, b, c):
        await sandbox.destroy()
    assert await ids(local_provider, "bot") == []


async def test_destroy_is_idempotent_and_later_calls_fail(
    local_provider: LocalProvider, sandbox_root: Path
) -> None:
    sandbox = await local_provider.create(SandboxSpec(session_key="s"))
    command_id = await sandbox.start_command("bash", "sleep 1000")
    await sandbox.run_code("bash", "echo data > f; chmod 000 f; mkdir -p ro/x; chmod 500 ro", 10)
    assert (sandbox_root / sandbox.id).is_dir()

    await sandbox.destroy()
    await sandbox.destroy()
    assert not (sandbox_root / sandbox.id).exists()
    with pytest.raises(SandboxUnavailable, match=f"sandbox {sandbox.id} was destroyed"):
        await sandbox.run_code("bash", "true", timeout_s=10)
    with pytest.raises(SandboxUnavailable, match="was destroyed"):
        await sandbox.command_state(command_id)
    with pytest.raises(SandboxUnavailable, match="was destroyed"):
        await sandbox.list_dir(WORK_DIR)
    with pytest.raises(SandboxUnavailable, match="was destroyed"):
        await read_all(sandbox, f"{WORK_DIR}/f")
    with pytest.raises(SandboxUnavailable, match="was destroyed"):
        await sandbox.upload(f"{WORK_DIR}/f", chunked(b"x", 1))


async def test_destroy_id_removes_orphans_and_rejects_bad_ids(sandbox_root: Path) -> None:
    first = local_provider_at(sandbox_root)
    orphan = await first.create(SandboxSpec(session_key="s", tags=("bot",)))
    await first.close()

    second = local_provider_at(sandbox_root)  # as after a restart
    assert await ids(second, "bot") == [orphan.id]
    await second.destroy_id(orphan.id)
    await second.destroy_id(orphan.id)
    assert await ids(second, "bot") == []
    with pytest.raises(SandboxError, match="not a local sandbox id"):
        await second.destroy_id("../../etc")


async def test_kill_right_after_start_never_hangs(local_sandbox: LocalSandbox) -> None:
    """A command killed while bwrap is still setting up its namespace must die too."""

    async def start_and_kill() -> None:
        for _ in range(10):
            command_id = await local_sandbox.start_command("bash", "sleep 30")
            await local_sandbox.kill_command(command_id)
            state = await local_sandbox.command_state(command_id)
            assert not state.running and state.result.status == "killed"

    await asyncio.wait_for(asyncio.gather(*(start_and_kill() for _ in range(6))), 60)


async def test_attach_kills_containers_left_running(sandbox_root: Path) -> None:
    """A bot killed while starting a container may leave it running; the next bot's attach
    stops it before taking the sandbox over."""
    first = local_provider_at(sandbox_root)
    second = local_provider_at(sandbox_root)
    try:
        sandbox = await first.create(SandboxSpec(session_key="crashed"))
        command_id = await sandbox.start_command("bash", "sleep 300")
        await asyncio.sleep(0.3)
        assert (await sandbox.command_state(command_id)).running
        adopted = await second.attach(sandbox.id)
        assert adopted is not None
        await _until_stopped(sandbox, command_id)
        assert not (await sandbox.command_state(command_id)).running
        assert (await adopted.run_code("bash", "echo ok", 10)).stdout.text == "ok\n"
    finally:
        await first.close()
        await second.close()


async def _until_stopped(sandbox: LocalSandbox, command_id: str) -> None:
    for _ in range(100):  # up to 5 s
        if not (await sandbox.command_state(command_id)).running:
            return
        await asyncio.sleep(0.05)


def test_a_container_orphaned_during_its_start_is_killed(tmp_path: Path) -> None:
    """A bot killed while bwrap was starting leaves the inner bwrap with parent 1, in a
    process group it does not lead; a restarted bot must still find and kill it."""
    home = tmp_path / "lcl-0123456789ab"
    script = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)',"
        f" '--bind', '{home / 'work'}', '/buddy/work'])\n"
    )  # the leader starts the "container" and exits, as a killed outer bwrap does
    subprocess.run([sys.executable, "-c", script], start_new_session=True, check=True)
    orphans = [p for p in processes_with(str(home / "work")) if p.ppid != os.getpid()]
    assert len(orphans) == 1 and os.getpgid(orphans[0].pid) != orphans[0].pid
    assert kill_containers_of(home) == 1
    deadline = time.monotonic() + 5
    while processes_with(str(home / "work")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(str(home / "work")) == []


class Proc(NamedTuple):
    pid: int
    ppid: int


def processes_with(text: str) -> list[Proc]:
    """Live host processes whose command line holds `text`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                found.append(Proc(int(pid), int(stat[1])))
        except OSError:
            continue
    return found
