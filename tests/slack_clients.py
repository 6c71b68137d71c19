"""The real slack_sdk clients pointed at a fake Slack, for the fake's own tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack

CONNECT_TIMEOUT_S = 5.0


async def api_error(call: Any) -> SlackApiError:
    """The SlackApiError an awaited SDK call raises."""
    with pytest.raises(SlackApiError) as err:
        await call
    return err.value


@contextlib.asynccontextmanager
async def socket_mode(
    slack: FakeSlack,
) -> AsyncIterator[tuple[SocketModeClient, list[SocketModeRequest]]]:
    """A connected SocketModeClient that acks every envelope and keeps what it got."""
    received: list[SocketModeRequest] = []
    sm = SocketModeClient(
        app_token=slack.app_token, web_client=AsyncWebClient(base_url=slack.api_url)
    )

    async def listener(client: Any, req: SocketModeRequest) -> None:
        received.append(req)
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    sm.socket_mode_request_listeners.append(listener)
    try:
        await asyncio.wait_for(sm.connect(), CONNECT_TIMEOUT_S)
        yield sm, received
    finally:
        await sm.close()
