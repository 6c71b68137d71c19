"""The sandbox limits are settings: each one reaches the sandbox, on either backend where
it applies, and a bad value is one clear line naming the variable."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from bot.compose import build_provider
from bot.errors import ConfigError
from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyProvider
from bot.sandbox.local import LocalProvider
from bot.settings import load_settings
from tests.fakes.buddy import FakeBuddy
from tests.support import CHECKOUT, buddy_settings, settings_for

ULIMITS = "echo $(ulimit -t) $(ulimit -n) $(ulimit -u) $(ulimit -f) $(ulimit -d)"
FLOOD = "head -c 100000 /dev/zero | tr '\\0' x"
PY_FLOOD = "print('x' * 100000, end='')"
LIMITS = {
    "sandbox_cpu_s": 7,
    "sandbox_open_files": 512,
    "sandbox_processes": 99,
    "sandbox_file_bytes": 4 << 20,
    "sandbox_process_memory_bytes": 512 << 20,
    "sandbox_output_bytes": 5000,
    "sandbox_command_max_s": 0.5,
}


async def test_limit_settings_reach_a_local_sandbox(sandbox_root: Path) -> None:
    provider = build_provider(settings_for("http://127.0.0.1:9", sandbox_root, **LIMITS))
    assert isinstance(provider, LocalProvider)
    sandbox = await provider.create(SandboxSpec(session_key="settings"))
    try:
        limits = await sandbox.run_code("bash", ULIMITS, 30)
        flood = await sandbox.run_code("bash", FLOOD, 30)
        py_flood = await sandbox.run_code("python", PY_FLOOD, 30)
        command_id = await sandbox.start_command("bash", "sleep 1000")
        await asyncio.sleep(1.0)
        command = await sandbox.command_state(command_id, wait_s=30)
    finally:
        await sandbox.destroy()
        await provider.close()
    # ulimit -f and -d count 1 KiB blocks
    assert limits.stdout.text.split() == ["7", "512", "99", str(4 << 10), str(512 << 10)]
    assert flood.stdout.cut_bytes == 100_000 - 5000
    assert py_flood.stdout.cut_bytes > 0 and len(py_flood.stdout.text) < 6000
    assert not command.running and command.result.status == "timeout"


async def test_output_and_command_cap_settings_reach_a_buddy_sandbox(sandbox_root: Path) -> None:
    async with FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake:
        settings = settings_for(
            "http://127.0.0.1:9", sandbox_root, **buddy_settings(fake.base_url), **LIMITS
        )
        provider = build_provider(settings)
        assert isinstance(provider, BuddyProvider)
        try:
            sandbox = await provider.create(SandboxSpec(session_key="settings"))
            flood = await sandbox.run_code("bash", FLOOD, 30)
            py_flood = await sandbox.run_code("python", PY_FLOOD, 30)
            command_id = await sandbox.start_command("bash", "sleep 1000")
            await asyncio.sleep(1.0)
            command = await sandbox.command_state(command_id, wait_s=30)
            await sandbox.destroy()
        finally:
            await provider.close()
    assert 100_000 - 5000 <= flood.stdout.cut_bytes <= 100_000 - 4000  # log lines: ± a newline
    assert py_flood.stdout.cut_bytes > 0 and len(py_flood.stdout.text) < 6000
    assert not command.running and command.result.status == "timeout"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("sandbox_cpu_s", 0),
        ("sandbox_cpus", "-1"),
        ("sandbox_processes", "many"),
        ("sandbox_output_bytes", 10),
        ("repo_allowed_addresses", "10.0.0.0/8, not-an-address"),
    ],
)
def test_a_bad_limit_setting_is_one_line_naming_it(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=name.upper()) as caught:
        load_settings(_env_file=None, sandbox_backend="local", **{name: value})
    assert "\n" not in str(caught.value)


def test_a_blank_cpus_setting_means_no_cap() -> None:
    assert load_settings(_env_file=None, sandbox_cpus=" ").sandbox_cpus is None
    assert load_settings(_env_file=None, sandbox_cpus="1.5").sandbox_cpus == 1.5


def test_settings_import_nothing_above_them() -> None:
    """The settings are read by every layer, so they may only use the floor below them."""
    sources = sorted((CHECKOUT / "bot" / "settings").glob("*.py"))
    assert len(sources) > 1
    imported = {
        node.module
        for source in sources
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bot")
    }
    imported = {name for name in imported if not name.startswith("bot.settings")}
    assert imported <= {"bot.errors", "bot.folders", "bot.networks", "bot.units"}, imported


@pytest.mark.parametrize(("given", "read"), [("assistant", "assistant"), ("agent", "assistant")])
def test_the_assistant_ui_is_read_under_its_earlier_name_too(given: str, read: str) -> None:
    assert settings_for("http://127.0.0.1:9", Path("/tmp"), slack_ui=given).slack_ui == read


def test_an_unknown_ui_is_one_line_naming_it() -> None:
    with pytest.raises(ConfigError, match="SLACK_UI") as caught:
        load_settings(_env_file=None, sandbox_backend="local", slack_ui="fancy")
    assert "\n" not in str(caught.value)
