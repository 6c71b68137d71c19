"""Where the metrics plug into the clients: the Slack Web API client's retry handlers, and a
store wrapper. Nothing else in the bot has to know about metrics."""

from __future__ import annotations

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.monitoring.metered_store import MeteredStore
from bot.monitoring.metrics import Metrics
from bot.store.base import Store


class SlackErrors(AsyncRetryHandler):
    """Counts every failed Slack Web API attempt: an error answer (`ok: false`), an HTTP
    error (a 429 too) or a dropped connection. The client asks its retry handlers about
    every attempt; this one never wants a retry, so the others still decide that. It must
    come first in the list: the client stops asking at the first handler that retries."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__(max_retry_count=0)
        self._metrics = metrics

    async def can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if error is not None or (response is not None and _failed(response)):
            self._metrics.error("slack")
        return False


def _failed(response: HttpResponse) -> bool:
    body = response.body if isinstance(response.body, dict) else {}
    return response.status_code >= 400 or body.get("ok") is False


def metered(store: Store, metrics: Metrics) -> Store:
    """`store`, its failures and queued questions counted in `metrics`."""
    return MeteredStore(store, metrics)
