"""The fake Slack's Socket Mode held to the service's rules, seen from a plain WebSocket
client: the ack deadline and redeliveries, sockets the server recycles (losing what was on
its way), and Socket Mode turned off."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from aiohttp import WSMsgType
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack
from tests.slack_clients import CONNECT_TIMEOUT_S, socket_mode

HUMAN = "U0HUMAN01"
DEADLINE_S = 0.2  # short, so the tests see the retries run out


def opened(slack: FakeSlack) -> dict[str, Any]:
    return {"type": "app_home_opened", "user": HUMAN}


async def connect(slack: FakeSlack, http: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
    web = AsyncWebClient(base_url=slack.api_url)
    url = (await web.apps_connections_open(app_token=slack.app_token))["url"]
    return await http.ws_connect(url)


async def frame(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    return await ws.receive_json(timeout=CONNECT_TIMEOUT_S)


async def closed(ws: aiohttp.ClientWebSocketResponse) -> bool:
    """True once the server has closed the socket (it sends nothing else before)."""
    message = await ws.receive(timeout=CONNECT_TIMEOUT_S)
    return message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED)


async def ack(ws: aiohttp.ClientWebSocketResponse, envelope: dict[str, Any]) -> None:
    await ws.send_str(json.dumps({"envelope_id": envelope["envelope_id"]}))


async def test_an_unacked_event_comes_back_three_times_then_no_more() -> None:
    async with (
        FakeSlack(ack_deadline_s=DEADLINE_S) as slack,
        aiohttp.ClientSession() as http,
        await connect(slack, http) as ws,
    ):
        assert (await frame(ws))["type"] == "hello"
        first = await slack.push_event(opened(slack), event_id="Ev0LATE001")
        got = [await frame(ws) for _ in range(4)]
        await slack.wait_for(lambda: not slack._tasks)  # the last deadline has passed too
        for envelope in got:
            await ack(ws, envelope)
        await slack.wait_for(lambda: len(slack.acks) == 4)

    assert got[0]["envelope_id"] == first
    assert [(e["retry_attempt"], e["retry_reason"]) for e in got] == [
        (0, ""),
        (1, "timeout"),
        (2, "timeout"),
        (3, "timeout"),
    ]
    assert {e["payload"]["event_id"] for e in got} == {"Ev0LATE001"}
    assert len({e["envelope_id"] for e in got}) == 4  # each delivery is its own envelope
    assert slack.redeliveries == got[1:] == slack.redeliveries_of("Ev0LATE001")
    assert slack.late_acks == [e["envelope_id"] for e in got]


async def test_an_ack_in_time_or_a_late_one_ends_the_retries() -> None:
    async with (
        FakeSlack(ack_deadline_s=DEADLINE_S) as slack,
        aiohttp.ClientSession() as http,
        await connect(slack, http) as ws,
    ):
        await frame(ws)  # hello
        await slack.push_event(opened(slack), event_id="Ev0ONTIME1")
        await ack(ws, await frame(ws))
        await slack.push_event(opened(slack), event_id="Ev0LATE002")
        original, again = await frame(ws), await frame(ws)
        await ack(ws, original)  # late, and for the first delivery: Slack has its ack
        await slack.wait_for(lambda: not slack._tasks)
        await ack(ws, again)
        await slack.wait_for(lambda: len(slack.acks) == 3)

    assert slack.redeliveries == [again]
    assert again["retry_attempt"] == 1 and again["payload"]["event_id"] == "Ev0LATE002"
    assert slack.late_acks == [original["envelope_id"], again["envelope_id"]]


async def test_commands_are_not_redelivered_and_their_late_acks_are_kept() -> None:
    async with (
        FakeSlack(ack_deadline_s=DEADLINE_S) as slack,
        aiohttp.ClientSession() as http,
        await connect(slack, http) as ws,
    ):
        await frame(ws)  # hello
        command = await slack.slash_command("/analyze", "x")
        await slack.push_event(opened(slack), event_id="Ev0AFTER01")
        got = [await frame(ws) for _ in range(3)]  # the command, the event, its retry
        await ws.send_str(json.dumps({"envelope_id": command, "payload": {"text": "late"}}))
        for envelope in got[1:]:
            await ack(ws, envelope)
        await slack.wait_for(lambda: len(slack.acks) == 3 and not slack._tasks)

    assert [e["type"] for e in got] == ["slash_commands", "events_api", "events_api"]
    assert [e["payload"]["event_id"] for e in slack.redeliveries] == ["Ev0AFTER01"]
    assert command in slack.late_acks


async def test_a_refreshed_socket_is_closed_and_what_it_lost_comes_back_on_the_next() -> None:
    async with (
        FakeSlack(ack_deadline_s=DEADLINE_S) as slack,
        aiohttp.ClientSession() as http,
        await connect(slack, http) as old,
    ):
        await frame(old)  # hello
        assert await slack.refresh_socket(lose=1) == 0
        assert await frame(old) == {
            "type": "disconnect",
            "reason": "refresh_requested",
            "debug_info": {"host": "applink-fake"},
        }
        assert await closed(old)
        lost = await slack.push_event(opened(slack), event_id="Ev0LOST001")
        async with await connect(slack, http) as new:
            assert (await frame(new))["type"] == "hello"
            again = await frame(new)
            await ack(new, again)
            await slack.wait_for(lambda: len(slack.acks) == 1)

    assert slack.lost == [lost] and slack.connection_of(lost) == 0
    assert again["payload"]["event_id"] == "Ev0LOST001"
    assert (again["retry_attempt"], again["retry_reason"]) == (1, "timeout")
    assert slack.connection_of(again["envelope_id"]) == 1


async def test_the_sdk_client_gets_what_a_refreshed_socket_lost() -> None:
    async with (
        FakeSlack(ack_deadline_s=DEADLINE_S) as slack,
        socket_mode(slack) as (_, received),
    ):
        await slack.refresh_socket("warning", lose=1)
        lost = await slack.push_event(opened(slack), event_id="Ev0LOST002")
        await slack.wait_for(lambda: len(slack.acks) == 1, CONNECT_TIMEOUT_S)

    assert [(r.retry_attempt, r.retry_reason) for r in received] == [(1, "timeout")]
    assert received[0].payload["event_id"] == "Ev0LOST002" and slack.lost == [lost]
    assert slack.connections >= 2


async def test_link_disabled_closes_every_socket_until_socket_mode_is_back() -> None:
    async with FakeSlack() as slack, aiohttp.ClientSession() as http:
        ws = await connect(slack, http)
        await frame(ws)  # hello
        await slack.disable_socket_mode()
        assert (await frame(ws))["reason"] == "link_disabled"
        assert await closed(ws)
        async with await connect(slack, http) as refused:  # no hello: told at once
            assert (await frame(refused))["reason"] == "link_disabled"
            assert await closed(refused)
        slack.enable_socket_mode()
        async with await connect(slack, http) as back:
            assert (await frame(back))["type"] == "hello"
        await ws.close()

    assert slack.link_refusals == 1
