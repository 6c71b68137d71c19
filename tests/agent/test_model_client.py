"""The model client's transport: the SDK's aiohttp one, its connections kept alive at the
TCP level, and many turns in flight at once sharing its pool."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from bot.agent.model_client import KEEPALIVE, build_client
from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.support import settings_for

PARAMS: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}


def _sockets_to(port: int) -> list[socket.socket]:
    """This process's TCP sockets connected to 127.0.0.1:`port` (each a duplicate)."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # not a socket, or already closed
        try:
            if sock.type == socket.SOCK_STREAM and sock.getpeername()[1:2] == (port,):
                found.append(sock)
                continue
        except OSError:
            pass  # not connected
        sock.close()
    return found


async def test_the_model_apis_connections_keep_alive_at_the_tcp_level(tmp_path: Path) -> None:
    """A turn answered whole is silent on the wire until it is done, minutes for a long
    one; without TCP keepalive some networks drop the connection meanwhile."""
    async with FakeAnthropic(lambda req: Reply([text("hello")])) as api:
        client = build_client(settings_for(api.base_url, tmp_path))
        try:
            message = await client.messages.create(**PARAMS)
            port = int(api.base_url.rsplit(":", 1)[1].split("/")[0])
            sockets = _sockets_to(port)
            options = [[s.getsockopt(level, name) for level, name, _ in KEEPALIVE] for s in sockets]
            for sock in sockets:
                sock.close()
        finally:
            await client.close()
    assert message.content[-1].text == "hello"
    assert options, "the connection is kept for the next turn"
    assert all(values == [value for *_, value in KEEPALIVE] for values in options), options


async def test_turns_in_flight_at_once_each_get_their_answer(tmp_path: Path) -> None:
    async with FakeAnthropic(lambda req: Reply([text(req.last_user_text)])) as api:
        client = build_client(settings_for(api.base_url, tmp_path))
        try:
            asked = [f"question {i}" for i in range(50)]
            asks = [{**PARAMS, "messages": [{"role": "user", "content": q}]} for q in asked]
            answers = await asyncio.gather(*(client.messages.create(**a) for a in asks))
        finally:
            await client.close()
    assert [a.content[-1].text for a in answers] == asked
    assert len(api.requests) == 50
