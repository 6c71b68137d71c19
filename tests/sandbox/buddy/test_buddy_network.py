"""Model-written code has no network in a Buddy sandbox unless SANDBOX_NETWORK=on; setup
commands keep it. The fake Buddy runs commands on this machine with its network (a Buddy
sandbox is a VM on the internet), so a loopback server started here shows who can reach
out: a raw command can, the bot's snippets, kernel and detached commands cannot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from bot.sandbox.base import SandboxSpec
from bot.sandbox.buddy import BuddyConfig, BuddyProvider
from tests.fakes.buddy import FakeBuddy

TOKEN = "buddy-test-token"
PROBE = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
    "    print('connected')\n"
    "except OSError as exc:\n"
    "    print('refused:', exc)\n"
)
INTERFACES = (  # the interfaces there are, and whether lo is up (SIOCGIFFLAGS)
    "import fcntl, socket, struct\n"
    "request = struct.pack('16sH', b'lo', 0)\n"
    "flags = struct.unpack('16sH', fcntl.ioctl(socket.socket(), 0x8913, request))[1]\n"
    "print([name for _, name in socket.if_nameindex()], 'up' if flags & 1 else 'down')\n"
)


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        writer.close()


@contextlib.asynccontextmanager
async def listening() -> AsyncIterator[Listener]:
    listener = Listener()
    server = await asyncio.start_server(listener._accept, "127.0.0.1", 0)
    listener.port = server.sockets[0].getsockname()[1]
    async with server:
        yield listener


@contextlib.asynccontextmanager
async def provider_for(fake: FakeBuddy, **overrides: object) -> AsyncIterator[BuddyProvider]:
    config = BuddyConfig(
        token=TOKEN,
        workspace="acme",
        project="analytics",
        api_url=fake.base_url,
        retry_base_delay_s=0.01,
        poll_interval_s=0.02,
        **overrides,  # type: ignore[arg-type]
    )
    provider = BuddyProvider(config)
    try:
        yield provider
    finally:
        await provider.close()


async def test_model_code_is_offline_by_default(sandbox_root: Path) -> None:
    async with (
        listening() as server,
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake, setup_command=f"exec 3<>/dev/tcp/127.0.0.1/{server.port}") as made,
    ):
        sandbox = await made.create(SandboxSpec("offline"))
        assert server.accepted == 1  # the setup command reached out: setup keeps the network
        probe = PROBE.format(port=server.port)
        # The fake really has a network: a command the bot did not wrap connects.
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as api:
            url = f"{fake.base_url}/workspaces/acme/sandboxes/{sandbox.id}/exec"
            raw = await api.post(url, json={"command": probe, "runtime": "PYTHON"})
        assert raw.json()["stdout"] == "connected\n"
        assert server.accepted == 2

        in_kernel = await sandbox.run_code("python", probe, 20)
        assert in_kernel.stdout.text.startswith("refused: [Errno 101] Network is unreachable")
        bash = f"(exec 3<>/dev/tcp/127.0.0.1/{server.port}) 2>/dev/null && echo connected"
        in_bash = await sandbox.run_code("bash", bash + " || echo refused", 20)
        assert in_bash.stdout.text == "refused\n"
        detached = await sandbox.start_command("python", probe)
        while (state := await sandbox.command_state(detached)).running:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        assert state.result.stdout.text.startswith("refused:")
        seen = await sandbox.run_code("python", INTERFACES, 20)
        assert seen.stdout.text == "['lo'] down\n"  # a namespace of its own: only lo, down
        assert server.accepted == 2  # none of the model's code got through
        await sandbox.destroy()


async def test_sandbox_network_on_lets_model_code_connect(sandbox_root: Path) -> None:
    async with (
        listening() as server,
        FakeBuddy(sandbox_root, boot_delay_s=0.05) as fake,
        provider_for(fake, network=True) as made,
    ):
        sandbox = await made.create(SandboxSpec("online"))
        result = await sandbox.run_code("python", PROBE.format(port=server.port), 20)
        assert result.stdout.text == "connected\n"
        assert server.accepted == 1
        assert "unshare" not in fake.requests_to("POST", r"/commands$")[-1].json["command"]
        await sandbox.destroy()
