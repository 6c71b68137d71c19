"""Socket Mode in the fake Slack (slack-platform.md §1): ``apps.connections.open`` hands out
single-use tickets, ``/link`` is the WebSocket (``hello`` at once, pings answered), envelopes
go out on the newest open socket, and acks come back.

Acks are held to §1.3: a JSON object of ``envelope_id`` (an envelope that was sent, acked
once) and, only where the envelope ``accepts_response_payload``, an object ``payload``.
Anything else is a protocol error, kept in ``protocol_errors`` (the fake raises them when it
closes).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from tests.fakes.slack_common import Json

log = logging.getLogger(__name__)


@dataclass
class _Socket:
    ws: web.WebSocketResponse
    index: int  # which connection this is, by order of connecting (from 0)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    retired: bool = False  # sent a `disconnect`; no more envelopes go here


class SocketMode:
    """Mixed into FakeSlack: the Socket Mode side of the workspace."""

    app_id: str
    base_url: str
    connect_wait_s: float
    spread_events: bool  # each envelope to a random connection, as Slack does with several
    delivered_to: dict[str, int]  # envelope id -> connection it went to
    connections: int
    acks: list[Json]
    envelopes: list[Json]  # every envelope sent, in order
    sent_at: dict[str, float]  # envelope id -> when it was sent
    acked_at: dict[str, float]  # envelope id -> when its first ack arrived
    protocol_errors: list[str]  # malformed frames from the client
    _sent: dict[str, Json]  # envelope id -> the envelope
    _tickets: set[str]
    _sockets: list[_Socket]
    wait_for: Callable

    async def wait_for_ack(self, envelope_id: str, timeout: float = 5.0) -> Json:
        """The ack frame for ``envelope_id`` (with its ``payload``, if any)."""

        def ack() -> Json | None:
            return next((a for a in self.acks if a.get("envelope_id") == envelope_id), None)

        try:
            await self.wait_for(lambda: ack() is not None, timeout)
        except TimeoutError:
            raise TimeoutError(f"envelope {envelope_id} not acked within {timeout}s") from None
        return ack() or {}

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Send a ``disconnect`` frame on every open socket; the client must reconnect."""
        await self._wait_for_socket()
        frame = json.dumps(
            {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}}
        )
        for sock in self._live_sockets():
            sock.retired = True
            async with sock.lock:
                await sock.ws.send_str(frame)

    def _apps_connections_open(self, args: Json) -> Json:
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        ws_base = self.base_url.replace("http://", "ws://", 1)
        return {"url": f"{ws_base}/link/?ticket={ticket}&app_id={self.app_id}"}

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid or used ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse()  # autoping: pings are answered with their payload
        await ws.prepare(request)
        hello = {
            "type": "hello",
            "num_connections": len(self._live_sockets()) + 1,
            "debug_info": {
                "host": "applink-fake",
                "build_number": 1,
                "approximate_connection_time": 18060,
            },
            "connection_info": {"app_id": self.app_id},
        }
        await ws.send_str(json.dumps(hello))
        sock = _Socket(ws, self.connections)
        self._sockets.append(sock)
        self.connections += 1
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    self._on_client_frame(frame.data)
        finally:
            self._sockets.remove(sock)
        return ws

    def _on_client_frame(self, data: str) -> None:
        try:
            frame = json.loads(data)
        except ValueError:
            frame = None
        problem = self._ack_problem(frame)
        if problem:
            self.protocol_errors.append(f"{problem}: {data[:200]}")
            log.warning("fake Slack: %s: %r", problem, data[:200])
        if isinstance(frame, dict) and isinstance(frame.get("envelope_id"), str):
            self.acks.append(frame)
            self.acked_at.setdefault(frame["envelope_id"], time.monotonic())

    def _ack_problem(self, frame: object) -> str | None:
        """What is wrong with a frame from the client, taken as an ack; None if nothing."""
        if not isinstance(frame, dict):
            return "a frame that is not a JSON object"
        if extra := sorted(set(frame) - {"envelope_id", "payload"}):
            return f"an ack with fields an ack does not have {extra}"
        envelope_id = frame.get("envelope_id")
        envelope = self._sent.get(envelope_id) if isinstance(envelope_id, str) else None
        if envelope is None:
            return "an ack for no envelope that was sent"
        if envelope["envelope_id"] in self.acked_at:
            return "a second ack of one envelope"
        if "payload" not in frame:
            return None
        if not isinstance(frame["payload"], dict):
            return "an ack whose payload is not an object"
        if not envelope.get("accepts_response_payload"):
            return f"a payload in the ack of a {envelope['type']} envelope, which takes none"
        return None

    def _live_sockets(self) -> list[_Socket]:
        return [s for s in self._sockets if not s.retired and not s.ws.closed]

    async def _wait_for_socket(self, connection: int | None = None) -> _Socket:
        try:
            await self.wait_for(self._live_sockets, self.connect_wait_s)
        except TimeoutError:
            raise TimeoutError(f"no Socket Mode connection within {self.connect_wait_s}s") from None
        live = self._live_sockets()
        chosen = [s for s in live if s.index == connection]
        if chosen:
            return chosen[0]  # a test's pick, by order of connecting
        return random.choice(live) if self.spread_events else live[-1]

    def connection_of(self, envelope_id: str) -> int | None:
        """Which connection (by order of connecting, from 0) an envelope went to."""
        return self.delivered_to.get(envelope_id)

    async def _send_envelope(self, envelope: Json, connection: int | None = None) -> str:
        """Send on the newest open socket (or a random one with `spread_events`), waiting for
        one if the bot is reconnecting."""
        frame = json.dumps(envelope)
        while True:
            sock = await self._wait_for_socket(connection)
            try:
                async with sock.lock:
                    self._sent[str(envelope["envelope_id"])] = envelope
                    self.sent_at[str(envelope["envelope_id"])] = time.monotonic()
                    await sock.ws.send_str(frame)
                    self.delivered_to[str(envelope["envelope_id"])] = sock.index
            except ConnectionError:
                sock.retired = True  # it died under us; try the next one
                continue
            self.envelopes.append(envelope)
            return str(envelope["envelope_id"])

    @staticmethod
    def _envelope(kind: str, payload: Json, *, accepts_response_payload: bool) -> Json:
        return {
            "envelope_id": str(uuid.uuid4()),
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
        }
