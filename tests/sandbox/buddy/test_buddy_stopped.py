"""A Buddy sandbox stopped for inactivity is started again, not replaced: its files are
kept, its processes are not, and whoever uses it next is told (`BuddySandbox.wake`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.errors import SandboxUnavailable
from bot.run_events import RunFinished
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyProvider, BuddySandbox
from bot.sessions.sandbox_changes import STOPPED
from tests.buddy_client import provider_for
from tests.fakes.anthropic import FakeAnthropic, ModelRequest, Reply, text, tool_use
from tests.fakes.buddy import FakeBuddy
from tests.support import POPULATION_CSV, Recorder, buddy_settings, file_chunks, runtime_for

IDLE_S = 0.5
SANDBOXES = "/workspaces/acme/sandboxes"


@pytest.fixture
async def fake(sandbox_root: Path) -> AsyncIterator[FakeBuddy]:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as buddy:
        yield buddy


@pytest.fixture
async def provider(fake: FakeBuddy) -> AsyncIterator[BuddyProvider]:
    async with provider_for(fake) as made:
        yield made


async def stopped(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    """Let Buddy stop the sandbox for inactivity, and wait until it has."""
    fake.inactivity_timeout_s = IDLE_S
    await wait_stopped(fake, sandbox)
    fake.inactivity_timeout_s = None


async def wait_stopped(fake: FakeBuddy, sandbox: BuddySandbox) -> None:
    async with asyncio.timeout(10):
        while fake.sandboxes[sandbox.id].status != "STOPPED":  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def test_wake_starts_a_stopped_sandbox_with_its_files(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    await sandbox.run_code("bash", "echo mine > /buddy/work/out/x.txt", 10)
    assert await sandbox.wake() is False  # running: nothing to do
    assert fake.requests_to("POST", r"/start$") == []
    await stopped(fake, sandbox)

    assert await sandbox.wake() is True
    (start,) = fake.requests_to("POST", r"/start$")
    assert (start.path, start.json) == (f"{SANDBOXES}/{sandbox.id}/start", {})
    assert fake.sandboxes[sandbox.id].status == "RUNNING"
    kept = await sandbox.run_code("bash", "cat /buddy/work/out/x.txt", 10)
    assert kept.stdout.text == "mine\n"
    assert len(fake.requests_to("POST", r"/sandboxes$")) == 1  # not replaced
    assert await sandbox.wake() is False


async def test_a_command_refused_as_not_running_starts_the_sandbox_and_runs_once(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    await stopped(fake, sandbox)
    result = await sandbox.run_code("bash", "echo ran", 10)
    assert (result.status, result.stdout.text) == ("ok", "ran\n")
    assert len(fake.requests_to("POST", r"/commands$")) == 2  # refused, then sent again
    assert len(fake.sandboxes[sandbox.id].commands) == 1  # and it ran once
    assert len(fake.requests_to("POST", r"/start$")) == 1


async def test_the_kernel_state_is_lost_and_the_next_cell_says_so(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    first = await sandbox.run_code("python", "x = 41", 10)
    assert first.kernel == "started"
    await stopped(fake, sandbox)
    assert await sandbox.wake()
    after = await sandbox.run_code("python", "print(x + 1)", 10)
    assert after.kernel == "fresh" and "NameError" in after.stderr.text


async def test_a_call_longer_than_the_inactivity_timeout_is_not_stopped(fake: FakeBuddy) -> None:
    """Buddy counts a command's start as activity, not a process that goes on running: the
    bot keeps the sandbox active while a call runs (the fake honours the 1 s `timeout`)."""
    async with provider_for(fake, timeout_s=1) as provider:
        sandbox = await provider.create(SandboxSpec("s1"))
        bash = await sandbox.run_code("bash", "sleep 2.5; echo done", 10)
        cell = await sandbox.run_code("python", "import time; time.sleep(2.5); print('done')", 10)
        assert (bash.status, bash.stdout.text) == ("ok", "done\n")
        assert (cell.status, cell.stdout.text, cell.kernel) == ("ok", "done\n", "started")
        assert "STOPPING" not in [status for _, status, _ in fake.sandboxes[sandbox.id].history]
        execs = fake.requests_to("POST", r"/exec$")
        kept = [r for r in execs if r.json["command"] == "true"]  # the rest: the cell
        assert kept and {r.status for r in kept} == {200}
        assert {r.status for r in execs} == {200} and len(execs) == len(kept) + 1
        await wait_stopped(fake, sandbox)  # between calls Buddy may stop it, as it should
        await sandbox.destroy()


async def test_waiting_on_a_detached_command_keeps_the_sandbox_active(fake: FakeBuddy) -> None:
    """A wait longer than the inactivity timeout: the sandbox is kept active meanwhile, the
    wait is one followed log (not a poll a second), and it returns as the command ends."""
    async with provider_for(fake, timeout_s=1) as provider:
        sandbox = await provider.create(SandboxSpec("s1"))
        command_id = await sandbox.start_command("bash", "sleep 2.5; echo done")
        mark = len(fake.requests)
        state = await sandbox.command_state(command_id, wait_s=60)
        assert not state.running
        assert (state.result.status, state.result.stdout.text) == ("ok", "done\n")
        assert "STOPPING" not in [status for _, status, _ in fake.sandboxes[sandbox.id].history]
        during = fake.requests[mark:]
        assert {r.json["command"] for r in during if r.path.endswith("/exec")} == {"true"}
        reads = [r for r in during if r.method == "GET" and command_id in r.path]
        before_the_end = [(r.path, r.query) for r in reads if r.at < reads[0].at + 2.0]
        assert before_the_end == [(f"{reads[0].path}", {"follow": "true"})]
        await sandbox.destroy()


async def test_a_wait_on_buddy_ends_after_wait_s_with_the_output_so_far(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    command_id = await sandbox.start_command("bash", "echo begin; sleep 1000")
    state = await sandbox.command_state(command_id, wait_s=1)
    assert state.running and state.result.stdout.text == "begin\n"
    await sandbox.kill_command(command_id)
    await sandbox.destroy()


async def test_attach_keeps_a_stopped_sandbox_without_starting_it(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    made = await provider.create(SandboxSpec("s1"))
    await made.run_code("bash", "echo kept > /buddy/work/a.txt", 10)
    await stopped(fake, made)
    async with provider_for(fake) as later:  # a new process
        sandbox = await later.attach(made.id)
        assert sandbox is not None
        assert fake.sandboxes[made.id].status == "STOPPED"  # started only when used
        assert await sandbox.wake() is True
        assert (await sandbox.run_code("bash", "cat /buddy/work/a.txt", 10)).stdout.text == "kept\n"
        await sandbox.destroy()


async def test_attach_gives_up_on_a_failed_or_deleted_sandbox(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    failed = await provider.create(SandboxSpec("s1"))
    gone = await provider.create(SandboxSpec("s2"))
    fake.sandboxes[failed.id].set_status("FAILED")
    fake.vanish(gone.id)
    async with provider_for(fake) as later:
        assert await later.attach(failed.id) is None
        assert await later.attach(gone.id) is None


async def test_stop_waits_until_stopped_and_is_idempotent(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    running = await sandbox.start_command("bash", "sleep 60")
    await sandbox.stop()
    assert fake.sandboxes[sandbox.id].status == "STOPPED"
    (stop,) = fake.requests_to("POST", r"/stop$")
    assert stop.json == {}
    assert not (await sandbox.command_state(running)).running  # its processes ended
    await sandbox.stop()
    assert len(fake.requests_to("POST", r"/stop$")) == 1  # already stopped: nothing sent
    assert await sandbox.wake() is True


async def test_a_400_on_start_is_checked_against_the_sandboxs_state(
    fake: FakeBuddy, provider: BuddyProvider
) -> None:
    sandbox = await provider.create(SandboxSpec("s1"))
    await stopped(fake, sandbox)
    # Refused, and still stopped: that is the error.
    fake.fail_next(1, method="POST", path=r"/start$", status=400, message="No capacity")
    with pytest.raises(SandboxUnavailable, match=r"refused starting the sandbox \(No capacity"):
        await sandbox.wake()
    # Refused because it is starting already (another replica was first): fine.
    busy = "Cannot start sandbox in status STARTING"
    fake.fail_next(1, method="POST", path=r"/start$", status=400, message=busy, after=True)
    assert await sandbox.wake() is True
    assert fake.sandboxes[sandbox.id].status == "RUNNING"
    assert len(fake.requests_to("POST", r"/start$")) == 2


# -- a session resumed on its stopped sandbox --

WRITE = "open('/buddy/work/out/x.txt', 'w').write('written before the stop'); y = 1"
READ = "print(open('/buddy/work/out/x.txt').read()); print('y' in globals())"


def write_then_read(req: ModelRequest) -> Reply:
    """'write': write x.txt (and set a variable); anything else: read both back."""
    results = req.tool_results()
    if results:
        return Reply([text(results[-1].text)])
    question = req.last_user_blocks[-1]["text"]
    code = WRITE if question == "write" else READ
    return Reply([tool_use("run_code", {"language": "python", "code": code})])


async def test_a_session_resumes_on_its_stopped_sandbox(sandbox_root: Path) -> None:
    opened = []

    def opener() -> AsyncIterator[bytes]:
        opened.append(1)
        return file_chunks(POPULATION_CSV)

    async with (
        FakeAnthropic(write_then_read) as model,
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
    ):
        runtime = runtime_for(model.base_url, sandbox_root, **buddy_settings(fake.base_url))
        session = runtime.sessions.new("stopped")
        try:
            await session.add_file(POPULATION_CSV.name, opener)
            await session.ask("write", Recorder())
            sandbox = await session.sandbox()
            await stopped(fake, sandbox)  # Buddy's inactivity timeout
            again = await session.ask("read", Recorder())
            assert session.sandbox_id == sandbox.id  # the same sandbox, started again
        finally:
            await session.close()
            await runtime.close()
    assert isinstance(again, RunFinished)
    assert "written before the stop" in again.answer  # the model's own file survived
    assert "False" in again.answer  # its variable did not
    assert len(fake.requests_to("POST", r"/sandboxes$")) == 1
    assert len(fake.requests_to("POST", r"/start$")) == 1
    assert opened == [1]  # the upload was not fetched again
    told = model.requests[-2].last_user_text  # the second question's first model turn
    assert STOPPED in told and "fresh one" not in told
    assert STOPPED not in model.requests[0].last_user_text
    assert "fresh Python kernel" in model.requests[-1].messages[-1]["content"][0]["content"]


# -- a sandbox vanished while stopped --


async def test_a_sandbox_deleted_while_quiet_is_replaced_with_the_files_again(
    sandbox_root: Path,
) -> None:
    async with (
        FakeAnthropic(write_then_read) as model,
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
    ):
        runtime = runtime_for(model.base_url, sandbox_root, **buddy_settings(fake.base_url))
        session = runtime.sessions.new("vanished")
        try:
            await session.add_file(POPULATION_CSV.name, lambda: file_chunks(POPULATION_CSV))
            await session.ask("write", Recorder())
            first = await session.sandbox()
            await stopped(fake, first)
            fake.vanish(first.id)  # deleted behind the bot's back (a pipeline, a person)
            again = await session.ask("read", Recorder())
            second = await session.sandbox()
            listing = await second.list_dir("/buddy/work/uploads")
        finally:
            await session.close()
            await runtime.close()
    assert second.id != first.id
    assert [entry.name for entry in listing] == [POPULATION_CSV.name]  # taken in again
    assert isinstance(again, RunFinished) and "No such file" in again.answer
    assert "this is a fresh one" in model.requests[-2].last_user_text
