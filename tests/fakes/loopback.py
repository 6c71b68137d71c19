"""Serving a fake's aiohttp application on a loopback address."""

from __future__ import annotations

from aiohttp import web


async def serve(
    app: web.Application, port: int = 0, host: str = "127.0.0.1"
) -> tuple[web.AppRunner, str]:
    """Start `app` on `host` (port 0: any free one); returns the runner and base URL.
    Another loopback address (127.0.0.2) is another origin, as another host would be."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    bound_host, bound = runner.addresses[0][:2]
    return runner, f"http://{bound_host}:{bound}"
