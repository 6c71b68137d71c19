"""Serving a fake's aiohttp application on 127.0.0.1."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, port: int = 0) -> tuple[web.AppRunner, str]:
    """Start `app` on 127.0.0.1 (port 0: any free one); returns the runner and base URL."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    host, bound = runner.addresses[0][:2]
    return runner, f"http://{host}:{bound}"
