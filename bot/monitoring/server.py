"""`/healthz` and `/metrics` over HTTP, served by aiohttp on the bot's own event loop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from bot.errors import ConfigError
from bot.monitoring.metrics import Metrics
from bot.store.base import StoreError, UpkeepStore

log = logging.getLogger(__name__)

STORE_TIMEOUT_S = 3.0  # a store slower than this to answer a ping counts as down


class Health:
    """Ready for work: connected to Slack, the store answers, and not shutting down."""

    def __init__(self, store: UpkeepStore, slack_connected: Callable[[], Awaitable[bool]]) -> None:
        self._store = store
        self._slack_connected = slack_connected
        self.draining = False  # set when shutdown begins; never unset

    async def check(self) -> dict[str, Any]:
        """What `/healthz` answers; ready when `status` is "ok"."""
        if self.draining:
            return {"status": "draining"}
        slack, store = await asyncio.gather(self._slack_connected(), self._store_answers())
        status = "ok" if slack and store else "unavailable"
        return {"status": status, "slack": slack, "store": store}

    async def _store_answers(self) -> bool:
        try:
            await asyncio.wait_for(self._store.ping(), STORE_TIMEOUT_S)
        except (StoreError, TimeoutError) as exc:
            log.warning("health check: the store did not answer: %s", exc or "timed out")
            return False
        return True


class MonitoringServer:
    """Serves `health` and `metrics` on host:port; with no port, nothing is served."""

    def __init__(self, metrics: Metrics, health: Health, host: str, port: int | None) -> None:
        self._metrics = metrics
        self._health = health
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        if self._port is None:
            return
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._scrape)
        runner = web.AppRunner(app, access_log=None)  # probes every few seconds: no log lines
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"Configuration error: METRICS_PORT: cannot listen on {self._host}:"
                f"{self._port} ({exc.strerror or exc}). Choose a free port, or unset it."
            ) from None
        self._runner = runner
        log.info("Serving /healthz and /metrics on %s:%s", self._host, self._port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        body = await self._health.check()
        return web.json_response(body, status=200 if body["status"] == "ok" else 503)

    async def _scrape(self, request: web.Request) -> web.Response:
        # The Prometheus text format, or OpenMetrics when the scraper asks for it.
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encode(self._metrics.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})
