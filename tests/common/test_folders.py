"""The working folders (SANDBOX_ROOT, SPOOL_DIR): by default in the bot's state folder, not
a shared /tmp; made private; and refused, in one line at start, when they are a symlink or
another user's (who could then read every upload, or swap the sandboxes' folders)."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.folders import PRIVATE, WALKABLE, own_folder
from bot.settings import Settings
from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.terminal.test_terminal import bot_env

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder away")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_defaults_are_in_the_state_folder_not_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SANDBOX_ROOT", raising=False)
    monkeypatch.delenv("SPOOL_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    app = tmp_path / "state" / "slack-code-interpreter"
    assert (settings.sandbox_root, settings.spool_dir) == (app / "sandboxes", app / "spool")
    monkeypatch.delenv("XDG_STATE_HOME")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    for folder in (settings.sandbox_root, settings.spool_dir):
        assert not folder.is_absolute() and folder.parts[0] == ".state"  # the working dir


def test_a_missing_folder_is_made_private_under_walkable_parents(tmp_path: Path) -> None:
    spool = own_folder(tmp_path / "a" / "b" / "spool", PRIVATE, "SPOOL_DIR")
    assert spool.is_dir() and mode(spool) == PRIVATE
    assert mode(tmp_path / "a") == mode(tmp_path / "a" / "b") == WALKABLE
    root = own_folder(tmp_path / "a" / "root", WALKABLE, "SANDBOX_ROOT")
    assert mode(root) == WALKABLE


def test_an_open_folder_of_the_bots_own_is_narrowed(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    own_folder(folder, PRIVATE, "SPOOL_DIR")
    assert mode(folder) == PRIVATE


def test_a_symlink_or_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"SPOOL_DIR: .*link is a symlink"):
        own_folder(tmp_path / "link", PRIVATE, "SPOOL_DIR")
    with pytest.raises(ConfigError, match=r"SANDBOX_ROOT: .*file is not a folder"):
        own_folder(tmp_path / "file", WALKABLE, "SANDBOX_ROOT")


@as_root
def test_another_users_folder_is_refused_and_left_alone(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    os.chown(planted, 4242, 4242)
    with pytest.raises(ConfigError, match="belongs to uid 4242"):
        own_folder(planted, PRIVATE, "SPOOL_DIR")
    assert mode(planted) == 0o777


def ask(tmp_path: Path, sandbox_root: Path, base_url: str, **env: str) -> tuple[int, str]:
    data = tmp_path / "data.csv"
    data.write_text("a,b\n1,2\n")
    full = bot_env(sandbox_root, ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="sk-test", **env)
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "--csv", str(data), "hi"], cwd=tmp_path,
        env=full, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return proc.returncode, proc.stderr


async def test_a_spool_planted_as_a_symlink_stops_the_bot_and_gets_no_upload(
    tmp_path: Path, sandbox_root: Path
) -> None:
    """Another user made the spool path first, as a link to a folder of theirs."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    link = tmp_path / "spool"
    link.symlink_to(theirs)
    async with FakeAnthropic(lambda req: Reply([text("hello")])) as fake:
        code, err = await asyncio.to_thread(
            ask, tmp_path, sandbox_root, fake.base_url, SPOOL_DIR=str(link)
        )
    assert code == 2 and list(theirs.iterdir()) == []
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "SPOOL_DIR" in lines[0] and "symlink" in lines[0]


@as_root
async def test_a_sandbox_root_of_another_user_stops_the_bot(
    tmp_path: Path, sandbox_root: Path
) -> None:
    os.chown(sandbox_root, 4242, 4242)
    async with FakeAnthropic(lambda req: Reply([text("hello")])) as fake:
        code, err = await asyncio.to_thread(ask, tmp_path, sandbox_root, fake.base_url)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "SANDBOX_ROOT" in lines[0] and "uid 4242" in lines[0]
