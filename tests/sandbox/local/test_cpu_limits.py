"""Model-written code tries to hold the host's cores: busy loops in bash and node, in a call
or in a detached command, each loop a process of its own so no per-process RLIMIT_CPU
comes near stopping them. The bot sums the CPU time of the whole process tree from
outside and stops the tree once the sum passes the budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.compose import Runtime
from bot.run_events import RunFinished
from bot.sandbox.base import ExecResult, SandboxSpec
from bot.sandbox.limits import CPU_HARD_GRACE_S, Limits
from bot.sandbox.local import LocalProvider, LocalSandbox, cgroups
from tests.fakes.anthropic import FakeAnthropic, Reply, text, tool_use
from tests.support import Recorder, local_provider_at, settings_for

CPU_S = 3  # per-process soft limit, and the tree's budget (plus the grace)
LOOPS = 8  # 8 loops killed one by one at CPU_S would spend 24 s; the tree may spend 8
RUN_TIMEOUT_S = 240.0  # generous: the machine is shared, and only the CPU watch may end it

SPINNERS = {
    "bash children": "for i in $(seq 8); do (while :; do :; done) & done; wait",
    # orphans: their parent exits at once, so they belong to the namespace's init
    "bash orphans": "for i in $(seq 8); do ( (while :; do :; done) & ) ; done; "
    "while :; do sleep 1; done",
    "node": (
        "const { spawn } = require('child_process');\n"
        f"for (let i = 0; i < {LOOPS}; i++)\n"
        "  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'inherit' });\n"
    ),
}


def _language(spinner: str) -> str:
    return "node" if spinner == "node" else "bash"


async def _sandbox(root: Path, limits: Limits) -> tuple[LocalProvider, LocalSandbox]:
    provider = local_provider_at(root, limits)
    return provider, await provider.create(SandboxSpec(session_key="spin"))


def _stopped_for_cpu(result: ExecResult) -> None:
    assert result.status == "killed", result
    assert result.exit_code is None
    assert "CPU time" in result.note and f"{CPU_S + CPU_HARD_GRACE_S} s" in result.note


@pytest.mark.parametrize("spinner", sorted(SPINNERS))
async def test_busy_loops_in_a_call_are_stopped_by_their_trees_cpu_sum(
    sandbox_root: Path, spinner: str
) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(cpu_s=CPU_S))
    try:
        result = await sandbox.run_code(_language(spinner), SPINNERS[spinner], RUN_TIMEOUT_S)
        after = await sandbox.run_code("bash", "echo usable", 30)
    finally:
        await sandbox.destroy()
        await provider.close()
    _stopped_for_cpu(result)
    assert after.status == "ok" and after.stdout.text == "usable\n"


@pytest.mark.parametrize("spinner", sorted(SPINNERS))
async def test_busy_loops_in_a_detached_command_are_stopped_by_their_trees_cpu_sum(
    sandbox_root: Path, spinner: str
) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(cpu_s=CPU_S))
    try:
        command_id = await sandbox.start_command(_language(spinner), SPINNERS[spinner])
        deadline = time.monotonic() + RUN_TIMEOUT_S
        state = await sandbox.command_state(command_id)
        while state.running and time.monotonic() < deadline:
            state = await sandbox.command_state(command_id, wait_s=5)
    finally:
        await sandbox.destroy()
        await provider.close()
    assert not state.running
    _stopped_for_cpu(state.result)


async def test_a_call_under_its_budget_is_not_stopped(sandbox_root: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(cpu_s=CPU_S))
    try:
        # the budget is per call: several calls may each spend most of it
        results = [
            await sandbox.run_code("bash", "timeout 1 sh -c 'while :; do :; done'; echo done", 60)
            for _ in range(4)
        ]
    finally:
        await sandbox.destroy()
        await provider.close()
    assert [r.stdout.text for r in results] == ["done\n"] * 4
    assert all(r.status == "ok" and not r.note for r in results)


# -- through the whole loop, the budget set by SANDBOX_CPU_S --


def _spin_script(req):
    """The model runs the loops in a call, then in a detached command it waits on."""
    if req.turn == 0:
        code = SPINNERS["bash children"]
        return Reply([tool_use("run_code", {"language": "bash", "code": code})])
    if req.turn == 1:
        args = {"language": "bash", "code": SPINNERS["bash orphans"], "detached": True}
        return Reply([tool_use("run_code", args)])
    if req.turn == 2:
        command_id = req.tool_results()[0].text.split("as ")[1].split(";")[0]
        return Reply([tool_use("check_command", {"command_id": command_id, "wait_s": 240})])
    return Reply([text("gave up")])


async def test_the_model_is_told_its_loops_used_up_the_cpu_budget(sandbox_root: Path) -> None:
    recorder = Recorder()
    async with FakeAnthropic(_spin_script) as fake:
        settings = settings_for(
            fake.base_url, sandbox_root, sandbox_cpu_s=CPU_S, tool_timeout_s=int(RUN_TIMEOUT_S)
        )
        runtime = Runtime.from_settings(settings)  # the provider the settings describe
        session = runtime.sessions.new("spin")
        try:
            result = await session.ask("keep the cores busy", recorder)
        finally:
            await session.close()
            await runtime.close()
        last = fake.requests[-1]
    assert isinstance(result, RunFinished) and result.answer == "gave up"
    seen = [
        block["content"]
        for message in last.messages
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    call, _, command = seen
    for told in (call, command):
        assert "status: killed" in told
        assert f"more than {CPU_S + CPU_HARD_GRACE_S} s of CPU time" in told


# -- a CPU share per sandbox, where the host has a cpu cgroup --


@pytest.mark.skipif(cgroups.cpu_parent() is None, reason="no cpu cgroup on this host")
async def test_each_sandbox_runs_in_a_cpu_cgroup_of_its_own(sandbox_root: Path) -> None:
    provider, sandbox = await _sandbox(sandbox_root, Limits(cpus=1.5))
    other = await provider.create(SandboxSpec(session_key="other"))
    try:
        result = await sandbox.run_code("bash", "cat /proc/self/cgroup", 30)
        assert sandbox.cpu_cgroup is not None and other.cpu_cgroup is not None
        assert sandbox.cpu_cgroup != other.cpu_cgroup
        quota = (sandbox.cpu_cgroup / "cpu.cfs_quota_us").read_text().strip()
        period = (sandbox.cpu_cgroup / "cpu.cfs_period_us").read_text().strip()
        command_id = await sandbox.start_command("bash", "echo started; sleep 1000")
        while "started" not in (await sandbox.command_state(command_id, 1)).result.stdout.text:
            pass
        members = (sandbox.cpu_cgroup / "cgroup.procs").read_text().split()
        await sandbox.kill_command(command_id)
    finally:
        await sandbox.destroy()
        await other.destroy()
        await provider.close()
    assert result.status == "ok" and int(quota) == int(period) * 3 // 2
    assert members, "the command's processes joined the sandbox's cpu cgroup"
    assert not sandbox.cpu_cgroup.exists()  # removed with the sandbox


def test_a_cpu_cgroup_gets_an_equal_share_and_the_cores_cap(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    made = cgroups.make_cpu(v1, "a", cpus=1.5, uid=None)
    assert made is not None
    assert (made / "cpu.cfs_quota_us").read_text() == "150000"
    assert (made / "cpu.shares").read_text() == "1024"


@pytest.mark.skipif(cgroups.cpu_parent() is None, reason="no cpu cgroup on this host")
async def test_closing_the_provider_leaves_no_cgroup_behind(sandbox_root: Path) -> None:
    """Processes just killed are still on their way out when the cgroups go."""
    left = []
    for _ in range(5):
        provider, sandbox = await _sandbox(sandbox_root, Limits())
        await sandbox.start_command("bash", "for i in $(seq 150); do sleep 300 & done; wait")
        await sandbox.run_code("bash", "true", 30)
        await provider.close()
        left += [cgroup for cgroup in sandbox.cgroups if cgroup.exists()]
    assert left == []
