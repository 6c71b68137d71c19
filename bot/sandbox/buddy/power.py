"""A Buddy sandbox's state: reading it, waiting for it, starting and stopping it (§5.8, §6.1).

Buddy stops a sandbox after `timeout` seconds without activity; its disk is kept and its
processes end. Starting it again brings the files back, not the processes. Start and stop
answer at once with the sandbox on its way (STARTING, STOPPING); the waiting is ours. Both
are safe to send again (the Python SDK retries them), and a 400 may only mean the sandbox
got there already, so their answer is checked against the sandbox's state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from bot.errors import SandboxError, SandboxUnavailable
from bot.sandbox.buddy.config import BuddyConfig
from bot.sandbox.buddy.errors import error_text
from bot.sandbox.buddy.http import BuddyHttp
from bot.sandbox.buddy.views import booted

MAX_POLL_DELAY_S = 1.0
STOP_WAIT_S = 60.0  # the Python SDK's limit for a stop
BOOTING = ("STARTING", "RESTORING")


class Power:
    """State calls for the sandboxes of one provider."""

    def __init__(self, http: BuddyHttp, config: BuddyConfig) -> None:
        self._http = http
        self._config = config

    async def view(self, sandbox_id: str, what: str) -> dict[str, Any]:
        """The sandbox's full view; SandboxGone if Buddy no longer knows it."""
        response = await self._http.request(
            "GET", self._http.sandbox_url(sandbox_id), scope="sandbox", what=what, idempotent=True
        )
        return self._http.json_of(response, what)

    async def wait_ready(self, sandbox_id: str) -> None:
        """Poll until setup SUCCESS and status RUNNING; fail fast on FAILED or STALE."""
        limit = self._config.ready_timeout_s
        view: dict[str, Any] = {}
        try:
            async with asyncio.timeout(limit):
                async for view in self._polled(sandbox_id, "waiting for the sandbox to start"):
                    if booted(view):
                        return
        except TimeoutError:
            raise SandboxUnavailable(
                f"the sandbox was not ready after {limit:g} s (status "
                f"{view.get('status', '?')}, setup {view.get('setup_status', '?')}); "
                "try again, or raise BUDDY_READY_TIMEOUT_S if the setup command is slow."
            ) from None

    async def wake(self, sandbox_id: str) -> bool:
        """Make sure the sandbox runs, starting it if it was stopped; True if it was not
        running (its processes are gone then)."""
        view = await self.view(sandbox_id, "checking the sandbox")
        if booted(view):
            return False
        if view.get("status") == "STOPPING":
            view = await self._wait_for(sandbox_id, "STOPPED")
        if view.get("status") == "STOPPED":
            await self._act(sandbox_id, "start", unless=("STOPPED",))
        await self.wait_ready(sandbox_id)
        return True

    async def stop(self, sandbox_id: str) -> None:
        """Stop the sandbox (files kept, processes ended) and wait until it is STOPPED."""
        view = await self.view(sandbox_id, "checking the sandbox")
        if view.get("status") == "STOPPED":
            return
        if view.get("status") in BOOTING:  # Buddy refuses to stop a sandbox on its way up
            await self.wait_ready(sandbox_id)
        if view.get("status") != "STOPPING":
            await self._act(sandbox_id, "stop", unless=("RUNNING", *BOOTING))
        await self._wait_for(sandbox_id, "STOPPED")

    # -- internals --

    async def _act(self, sandbox_id: str, action: str, *, unless: tuple[str, ...]) -> None:
        """POST start or stop. A 400 is fine if the sandbox has left the states in `unless`
        meanwhile (another process sent the same); otherwise it is the error."""
        what = f"{'starting' if action == 'start' else 'stopping'} the sandbox"
        response = await self._http.request(
            "POST",
            self._http.sandbox_url(sandbox_id, action),
            json={},
            scope="sandbox",
            what=what,
            idempotent=True,
            accept=(400,),
        )
        if response.status_code != 400:
            return
        status = (await self.view(sandbox_id, what)).get("status")
        if status in unless:
            said = error_text(response.content) or "HTTP 400"
            raise SandboxUnavailable(f"Buddy refused {what} ({said}; status {status})")

    async def _wait_for(self, sandbox_id: str, status: str) -> dict[str, Any]:
        """Poll until the sandbox reaches `status` (FAILED raises), within STOP_WAIT_S."""
        try:
            async with asyncio.timeout(STOP_WAIT_S):
                async for view in self._polled(sandbox_id, f"waiting for {status}"):
                    if view.get("status") == status:
                        return view
                    if view.get("status") == "FAILED":
                        raise SandboxUnavailable("the sandbox failed while it was stopping")
        except TimeoutError:
            pass
        raise SandboxError(f"the sandbox did not reach {status} within {STOP_WAIT_S:g} s")

    async def _polled(self, sandbox_id: str, what: str) -> AsyncIterator[dict[str, Any]]:
        """The sandbox's view, again and again, backing off from the poll interval."""
        delay = self._config.poll_interval_s
        while True:
            yield await self.view(sandbox_id, what)
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, MAX_POLL_DELAY_S)
