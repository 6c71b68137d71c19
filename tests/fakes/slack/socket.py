"""Socket Mode in the fake Slack (slack-platform.md §1): ``apps.connections.open`` hands out
single-use tickets, ``/link`` is the WebSocket (``hello`` at once, pings answered), envelopes
go out on the newest open socket, and acks come back.

Acks are held to §1.3: a JSON object of ``envelope_id`` (an envelope that was sent, acked
once) and, only where the envelope ``accepts_response_payload``, an object ``payload``.
Anything else is a protocol error, kept in ``protocol_errors`` (the fake raises them when it
closes).

An ``events_api`` envelope not acked within ``ack_deadline_s`` (3 s, §1.3) is delivered again
as Slack does: a new envelope with the same event (same ``event_id``), ``retry_attempt`` one
higher and ``retry_reason`` ``timeout``, at most ``max_redeliveries`` (3) times; each one is
kept in ``redeliveries``. Where the doc is vague the fake assumes: the HTTP policy's
spacing (at once, ~1 min, ~5 min) becomes one deadline per attempt; an ack of any delivery
of the event (late or on another connection) ends the retries; slash commands and actions
are never redelivered (their late acks are only kept, in ``late_acks``).

The server ends sockets itself too (§1.2): ``refresh_socket`` sends ``disconnect`` and
closes, optionally losing the next envelopes as if they went down the closing socket (they
come back as redeliveries on the next one); ``disable_socket_mode`` sends ``link_disabled``
and, until ``enable_socket_mode``, tells every new socket the same and closes it at once
(assumed: ``apps.connections.open`` keeps handing out URLs, so a client that reconnects on
every ``disconnect`` loops).
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

from aiohttp import WSCloseCode, WSMsgType, web

from tests.fakes.slack.common import Json

log = logging.getLogger(__name__)

ACK_DEADLINE_S = 3.0  # §1.3: the Events API and interactivity ack deadline
MAX_REDELIVERIES = 3  # §1.3: up to 3 retries


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
    connection_ports: list[int]  # connection index -> the client's local port
    acks: list[Json]
    envelopes: list[Json]  # every envelope sent, in order
    sent_at: dict[str, float]  # envelope id -> when it was sent
    acked_at: dict[str, float]  # envelope id -> when its first ack arrived
    protocol_errors: list[str]  # malformed frames from the client
    ack_deadline_s: float
    max_redeliveries: int
    redeliveries: list[Json]  # envelopes sent again because no delivery was acked in time
    late_acks: list[str]  # envelope ids acked after the deadline
    lost: list[str]  # envelope ids that went down a closing socket, never to arrive
    socket_mode_enabled: bool  # False: every socket is told link_disabled and closed
    link_refusals: int  # sockets closed at once because Socket Mode was off
    _lose_next: int  # envelopes still to lose on the socket being closed
    _closing_index: int | None  # the connection refresh_socket closed last
    _event_attempts: dict[str, int]
    _tasks: set[asyncio.Task[None]]
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
        """Send a ``disconnect`` frame on every open socket; the client must reconnect (and
        close the old socket itself)."""
        await self._wait_for_socket()
        for sock in self._live_sockets():
            await self._tell_disconnect(sock, reason)

    async def refresh_socket(self, reason: str = "refresh_requested", *, lose: int = 0) -> int:
        """Recycle the newest socket as Slack does every few hours: ``disconnect``, then the
        server closes it. The next `lose` envelopes are lost with it (sent, never received,
        so never acked: they come back as redeliveries). Returns the closed connection."""
        sock = await self._wait_for_socket()
        self._lose_next, self._closing_index = lose, sock.index
        await self._tell_disconnect(sock, reason)
        await sock.ws.close(code=WSCloseCode.GOING_AWAY, message=reason.encode())
        return sock.index

    async def disable_socket_mode(self) -> None:
        """Socket Mode turned off in the app's settings: every socket is told
        ``link_disabled`` and closed, and so is every new one until `enable_socket_mode`."""
        self.socket_mode_enabled = False
        for sock in self._live_sockets():
            await self._tell_disconnect(sock, "link_disabled")
            await sock.ws.close(code=WSCloseCode.GOING_AWAY, message=b"link_disabled")

    def enable_socket_mode(self) -> None:
        self.socket_mode_enabled = True

    async def _tell_disconnect(self, sock: _Socket, reason: str) -> None:
        sock.retired = True
        async with sock.lock:
            await sock.ws.send_str(_disconnect_frame(reason))

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
        if not self.socket_mode_enabled:
            self.link_refusals += 1
            await ws.send_str(_disconnect_frame("link_disabled"))
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"link_disabled")
            return ws
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
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.connection_ports.append(peer[1] if peer else 0)
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
            envelope_id, now = frame["envelope_id"], time.monotonic()
            sent = self.sent_at.get(envelope_id, now)
            if envelope_id not in self.acked_at and now - sent > self.ack_deadline_s:
                self.late_acks.append(envelope_id)
            self.acked_at.setdefault(envelope_id, now)

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
        one if the bot is reconnecting; an event not acked in time is sent again."""
        envelope_id = str(envelope["envelope_id"])
        if self._lose_next and self._closing_index is not None:
            self._lose_next -= 1  # it went down the socket refresh_socket closed
            self._record_sent(envelope, self._closing_index)
            self.lost.append(envelope_id)
        else:
            await self._deliver(envelope, connection)
        self.envelopes.append(envelope)
        if envelope["type"] == "events_api":
            task = asyncio.create_task(self._redeliver_unacked(envelope))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return envelope_id

    async def _deliver(self, envelope: Json, connection: int | None) -> None:
        frame = json.dumps(envelope)
        while True:
            sock = await self._wait_for_socket(connection)
            try:
                async with sock.lock:
                    self._record_sent(envelope, sock.index)
                    await sock.ws.send_str(frame)
            except ConnectionError:
                sock.retired = True  # it died under us; try the next one
                continue
            return

    def _record_sent(self, envelope: Json, index: int) -> None:
        envelope_id = str(envelope["envelope_id"])
        self._sent[envelope_id] = envelope
        self.sent_at[envelope_id] = time.monotonic()
        self.delivered_to[envelope_id] = index

    async def _redeliver_unacked(self, envelope: Json) -> None:
        """After the deadline, send the event again unless some delivery of it was acked, a
        later delivery is already out, or the retries are used up."""
        await asyncio.sleep(self.ack_deadline_s)
        event_id = str(envelope["payload"].get("event_id", ""))
        attempt = int(envelope.get("retry_attempt") or 0)
        latest = self._event_attempts.get(event_id, attempt)
        if self._event_acked(event_id) or attempt < latest or attempt >= self.max_redeliveries:
            return
        self._event_attempts[event_id] = attempt + 1
        again = {
            **envelope,
            "envelope_id": str(uuid.uuid4()),
            "retry_attempt": attempt + 1,
            "retry_reason": "timeout",
        }
        self.redeliveries.append(again)
        try:
            await self._send_envelope(again)
        except TimeoutError:  # nobody connected: Slack gives up on it too
            log.warning("fake Slack: event %s redelivery %d found no socket", event_id, attempt + 1)

    def _event_acked(self, event_id: str) -> bool:
        return any(
            e["type"] == "events_api" and e["payload"].get("event_id") == event_id
            for envelope_id, e in self._sent.items()
            if envelope_id in self.acked_at
        )

    def redeliveries_of(self, event_id: str) -> list[Json]:
        """The redeliveries of one event, in order."""
        return [e for e in self.redeliveries if e["payload"].get("event_id") == event_id]

    @staticmethod
    def _envelope(kind: str, payload: Json, *, accepts_response_payload: bool) -> Json:
        return {
            "envelope_id": str(uuid.uuid4()),
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
        }


def _disconnect_frame(reason: str) -> str:
    return json.dumps(
        {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}}
    )
