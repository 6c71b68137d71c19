"""Model code cannot get a later command of the bot's to run outside its network
namespace: not through the files a shell reads at start, the PATH, or the kernel's folder.

Each attack has model code (run by the bot) leave something behind; a later command of
the bot's then runs it. The payload connects to a loopback listener, which only works with
the network, and if it does, records where it ran in /buddy/work/escaped: a payload run in
the namespace (where model code belongs) cannot connect and records nothing.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy.sandbox import BuddySandbox
from tests.fakes.buddy import FakeBuddy
from tests.fakes.buddy.vm import PATH, VmShell
from tests.sandbox.buddy.test_buddy_network import listening, provider_for

HOME = "/home/buddy"


def payload(port: int) -> str:
    """Shell lines that, given the network, connect out and say where they ran."""
    return (
        f"if (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; then "
        'echo "$0 $$" >> /buddy/work/escaped; fi\n'
    )


def escaped(fake: FakeBuddy, sandbox: BuddySandbox) -> str:
    """What payloads that got the network recorded."""
    vm = fake.sandboxes[sandbox.id].vm
    assert vm is not None
    marker = vm.work / "escaped"
    return marker.read_text() if marker.exists() else ""


async def test_startup_files_written_by_model_code_do_not_run_later(sandbox_root: Path) -> None:
    """A login shell (as Buddy's may be) reads ~/.bash_profile or ~/.profile first."""
    async with (
        listening() as server,
        FakeBuddy(sandbox_root, boot_delay_s=0.05, vm_shell=VmShell(login=True)) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("startup-files"))
        files = " ".join(f"{HOME}/{name}" for name in STARTUP_FILES)
        plant = f"for f in {files}; do printf %s {shlex.quote(payload(server.port))} > $f; done"
        for language, code in (("bash", plant), ("python", _python_shell(plant))):
            await sandbox.run_code(language, code, 20)
        later = await sandbox.run_code("bash", "echo later", 20)
        cell = await sandbox.run_code("python", "print('cell')", 20)
        assert (later.stdout.text, cell.stdout.text) == ("later\n", "cell\n")
        assert escaped(fake, sandbox) == ""
        assert server.accepted == 0
        await sandbox.destroy()


STARTUP_FILES = (".bash_profile", ".bash_login", ".profile", ".bashrc", ".bash_logout")


async def test_tools_planted_on_a_writable_path_entry_do_not_run(sandbox_root: Path) -> None:
    """Buddy's PATH may hold a folder the sandbox user can write (~/.local/bin on a login,
    or any other): the bot's wrapper must not pick its tools from there."""
    planted = "/buddy/bin"
    shell = VmShell(path=f"{planted}:{PATH}")
    async with (
        listening() as server,
        FakeBuddy(sandbox_root, boot_delay_s=0.05, vm_shell=shell) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("path"))
        tools = "timeout env unshare mkdir cat rm flock mkfifo sleep mount"
        plant = (
            f"mkdir -p {planted} && cd {planted} && for t in {tools}; do "
            f"{{ echo '#!/bin/bash'; printf %s {shlex.quote(payload(server.port))}; "
            'echo "exec /usr/bin/$t \\"\\$@\\""; } > $t && chmod +x $t; done && echo planted'
        )
        first = await sandbox.run_code("bash", plant, 20)
        assert first.stdout.text == "planted\n", first.stderr.text
        later = await sandbox.run_code("bash", "echo later", 20)
        cell = await sandbox.run_code("python", "print('cell')", 20)
        assert (later.stdout.text, cell.stdout.text) == ("later\n", "cell\n")
        assert escaped(fake, sandbox) == ""
        assert server.accepted == 0
        await sandbox.destroy()


def _python_shell(script: str) -> str:
    return f"import subprocess\nsubprocess.run(['bash', '-c', {script!r}])\n"


REPLACE_FIFO = """import glob, os
for inbox in glob.glob('/buddy/work/.cache/kernel/*/in'):
    os.rename(inbox, inbox + '.kept')  # the kernel keeps reading it: it holds it open
    os.symlink('/home/buddy/.bash_profile', inbox)
print('planted')
"""
REPLACE_FOLDER = """import glob, os
for folder in glob.glob('/buddy/work/.cache/kernel/*'):
    os.rename(folder, folder + '.kept')
    os.symlink('/home/buddy', folder)
print('planted')
"""


@pytest.mark.parametrize("plant", [REPLACE_FIFO, REPLACE_FOLDER], ids=["fifo", "folder"])
async def test_the_kernel_folder_does_not_lead_the_bot_elsewhere(
    sandbox_root: Path, plant: str
) -> None:
    """Model code may swap the kernel's FIFO or folder for a link; the bot's next cell
    must not then write where model code cannot (/home, here), and still runs."""
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("kernel-folder"))
        first = await sandbox.run_code("python", plant, 20)
        assert first.stdout.text == "planted\n", first.stderr.text
        later = await sandbox.run_code("python", "print('later')", 20)
        vm = fake.sandboxes[sandbox.id].vm
        assert vm is not None
        assert sorted(p.name for p in (vm.home / "disk/home/buddy").iterdir()) == []
        assert later.stdout.text == "later\n", later.stderr.text
        await sandbox.destroy()


MOVE_FOLDER_AWHILE = """import glob, os, time
folder = glob.glob('/buddy/work/.cache/kernel/*')[0]
os.rename(folder, folder + '.away')
time.sleep(2.5)  # past the kernel's check that its folder is still there
os.rename(folder + '.away', folder)
print('back')
"""


async def test_a_cell_that_moves_its_kernels_folder_away_awhile_still_ends(
    sandbox_root: Path,
) -> None:
    """An idle kernel whose folder is gone takes it that a newer kernel cleared it, and
    exits; a cell running in it may move the folder itself, and must not die of it."""
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("kernel-moved"))
        moved = await sandbox.run_code("python", MOVE_FOLDER_AWHILE, 20)
        assert (moved.stdout.text, moved.kernel) == ("back\n", "started"), moved
        later = await sandbox.run_code("python", "print('later')", 20)
        assert (later.stdout.text, later.kernel) == ("later\n", "kept"), later
        await sandbox.destroy()


async def test_model_code_cannot_reach_the_users_services(sandbox_root: Path) -> None:
    """A socket in the user's runtime folder (/run/user/1000: a session bus, systemd's
    user manager) belongs to a service outside the namespace that would start what it is
    asked to, with the network: model code must not reach it."""
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("services"))
        vm = fake.sandboxes[sandbox.id].vm
        assert vm is not None
        connected = 0

        async def service(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connected
            connected += 1
            writer.close()

        server = await asyncio.start_unix_server(service, vm.runtime / "bus")
        async with server:
            probe = "import socket\nsocket.socket(socket.AF_UNIX).connect('/run/user/1000/bus')"
            raw = await fake.sandboxes[sandbox.id].vm.run(f"python3 -c {shlex.quote(probe)}")
            assert raw.exit_code == 0, raw.stderr  # the service is there, outside
            assert connected == 1
            for language, code in (("python", probe), ("bash", f"python3 -c {shlex.quote(probe)}")):
                result = await sandbox.run_code(language, code, 20)
                assert result.exit_code != 0
            assert connected == 1
        await sandbox.destroy()


LINK_THE_FILE = "ln -s /home/buddy/.bash_profile /buddy/work/uploads/data.csv"
LINK_THE_FOLDER = "rm -rf /buddy/work/uploads && ln -s /home/buddy /buddy/work/uploads"


@pytest.mark.parametrize("plant", [LINK_THE_FILE, LINK_THE_FOLDER], ids=["file", "folder"])
async def test_an_upload_does_not_follow_a_link_model_code_planted(
    sandbox_root: Path, plant: str
) -> None:
    """An upload goes where the bot says, not where a link model code left there points
    (the file's content may be a payload: a hostile CSV's)."""
    async with (
        listening() as server,
        FakeBuddy(sandbox_root, boot_delay_s=0.05, vm_shell=VmShell(login=True)) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("upload-link"))
        await sandbox.run_code("bash", f"mkdir -p /buddy/work/uploads && {plant}", 20)
        content = payload(server.port).encode()

        async def chunks() -> AsyncIterator[bytes]:
            yield content

        await sandbox.upload("/buddy/work/uploads/data.csv", chunks())
        later = await sandbox.run_code("bash", "cat /buddy/work/uploads/data.csv", 20)
        assert later.stdout.text == content.decode()
        assert escaped(fake, sandbox) == ""
        vm = fake.sandboxes[sandbox.id].vm
        assert vm is not None
        assert sorted(p.name for p in (vm.home / "disk/home/buddy").iterdir()) == []
        assert (vm.work / "uploads").is_dir() and not (vm.work / "uploads").is_symlink()
        await sandbox.destroy()


async def test_a_kernel_starts_in_its_own_folder_not_through_a_link(sandbox_root: Path) -> None:
    """The kernel's launcher writes its files where the bot says, even if model code put
    a link in place of the kernels' folder."""
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("kernel-root"))
        link = "ln -s /home/buddy /buddy/work/.cache/kernel && echo planted"
        plant = f"rm -rf /buddy/work/.cache/kernel && mkdir -p /buddy/work/.cache && {link}"
        first = await sandbox.run_code("bash", plant, 20)
        assert first.stdout.text == "planted\n", first.stderr.text
        cell = await sandbox.run_code("python", "print('cell')", 20)
        vm = fake.sandboxes[sandbox.id].vm
        assert vm is not None
        assert sorted(p.name for p in (vm.home / "disk/home/buddy").iterdir()) == []
        assert cell.stdout.text == "cell\n", cell.stderr.text
        await sandbox.destroy()


async def test_the_work_folder_cannot_be_swapped_for_a_link(sandbox_root: Path) -> None:
    """/buddy/work is where every command of the bot's writes (the kernel, uploads): model
    code must not be able to move it away and put a link in its place."""
    async with (
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake) as made,
    ):
        sandbox = await made.create(SandboxSpec("work-link"))
        swap = "cd / && mv /buddy/work /buddy/moved && ln -s /home/buddy /buddy/work"
        first = await sandbox.run_code("bash", swap, 20)
        assert first.exit_code != 0
        cell = await sandbox.run_code("python", "print('cell')", 20)
        vm = fake.sandboxes[sandbox.id].vm
        assert vm is not None
        assert sorted(p.name for p in (vm.home / "disk/home/buddy").iterdir()) == []
        assert cell.stdout.text == "cell\n", cell.stderr.text
        assert vm.work.is_dir() and not vm.work.is_symlink()
        await sandbox.destroy()
