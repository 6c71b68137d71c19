"""Making, finding and removing Buddy sandboxes.

Each sandbox is a Buddy sandbox VM in the configured project, with /buddy/work (uploads/,
out/) made by its first-boot commands (`scripts`) and the optional repository fetched
into /buddy/data. Creating and deleting are never resent blindly: when the outcome is
unknown, the sandbox is looked up before anything else is done. Waiting for a sandbox,
starting and stopping it are `power`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from bot.errors import BotError, SandboxError, SandboxGone, SandboxUnavailable
from bot.sandbox.base import MakeRoom, SandboxInfo, SandboxSpec, SnapshotInfo
from bot.sandbox.buddy.commands import CLEANUP_TIMEOUT_S
from bot.sandbox.buddy.config import BuddyConfig
from bot.sandbox.buddy.errors import OutcomeUnknown
from bot.sandbox.buddy.http import BuddyHttp
from bot.sandbox.buddy.power import Power
from bot.sandbox.buddy.sandbox import BuddySandbox
from bot.sandbox.buddy.scripts import create_body, is_ours, make_identifier
from bot.sandbox.buddy.snapshots import BuddySnapshots
from bot.sandbox.buddy.views import booted, parse_timestamp

log = logging.getLogger(__name__)

LIST_CONCURRENCY = 4
# A sandbox in one of these can be used, once started again if need be (`BuddySandbox.wake`).
USABLE = ("RUNNING", "STARTING", "RESTORING", "STOPPING", "STOPPED")


class BuddyProvider:
    """Creates Buddy sandboxes in one workspace/project over one shared HTTP client."""

    def __init__(self, config: BuddyConfig) -> None:
        self.config = config
        self.http = BuddyHttp(
            config.api_url,
            config.token,
            workspace=config.workspace,
            project=config.project,
            retry_base_delay_s=config.retry_base_delay_s,
            timeout_s=config.request_timeout_s,
        )
        self.power = Power(self.http, config)
        self.snapshots = BuddySnapshots(self.http, config.poll_interval_s)
        self._sandboxes: dict[str, BuddySandbox] = {}
        self._background: set[asyncio.Task[None]] = set()

    async def create(self, spec: SandboxSpec) -> BuddySandbox:
        if self.http.closed:
            raise SandboxUnavailable("the Buddy sandbox provider is closed")
        identifier = make_identifier(spec.session_key)
        sandbox_id = await self._post_create(identifier, create_body(spec, identifier, self.config))
        try:
            await self.power.wait_ready(sandbox_id)
        except BaseException:
            await self.shielded(self._delete_quietly(sandbox_id))
            raise
        sandbox = BuddySandbox(self, sandbox_id)
        self._sandboxes[sandbox_id] = sandbox
        return sandbox

    async def attach(self, sandbox_id: str) -> BuddySandbox | None:
        """A sandbox made by an earlier process, if it still exists and did not fail. A
        stopped one (Buddy's inactivity timeout, or SESSION_IDLE_ACTION=stop) is not started
        here: its session does that when it is next asked something (`BuddySandbox.wake`)."""
        if sandbox_id in self._sandboxes:
            return self._sandboxes[sandbox_id]
        try:
            view = await self.power.view(sandbox_id, "checking a sandbox")
        except SandboxGone:
            return None
        try:
            booted(view)
        except SandboxUnavailable:  # its setup or its start failed
            return None
        if view.get("status") not in USABLE:
            return None
        sandbox = self._sandboxes[sandbox_id] = BuddySandbox(self, sandbox_id, attached=True)
        return sandbox

    async def take_snapshot(self, sandbox_id: str, name: str) -> str:
        return await self.snapshots.take(sandbox_id, name)

    async def delete_snapshot(self, snapshot_id: str) -> None:
        await self.snapshots.delete(snapshot_id)

    async def list_snapshots(self, prefix: str) -> list[SnapshotInfo]:
        return await self.snapshots.list(prefix)

    async def list_tagged(self, tag: str) -> list[SandboxInfo]:
        """This bot's sandboxes carrying `tag`. The list shows no tags (and has no filter),
        so each candidate is read; only identifiers this backend makes are candidates."""
        candidates = [
            item["id"]
            for item in await self._list()
            if isinstance(item.get("id"), str) and is_ours(item.get("identifier"))
        ]
        gate = asyncio.Semaphore(LIST_CONCURRENCY)

        async def tagged(sandbox_id: str) -> SandboxInfo | None:
            async with gate:
                try:
                    view = await self.power.view(sandbox_id, "reading a sandbox's tags")
                except SandboxGone:
                    return None
            if tag not in (view.get("tags") or []):
                return None
            return SandboxInfo(sandbox_id, parse_timestamp(view.get("create_date")))

        found = await asyncio.gather(*(tagged(sandbox_id) for sandbox_id in candidates))
        return [info for info in found if info is not None]

    def has_room(self) -> bool:
        return True  # Buddy's own limits apply

    def waiting_for_slot(self, session_key: str) -> int:
        return 0  # Buddy's own limits apply; the bot sets none of its own

    def on_full(self, make_room: MakeRoom) -> None:
        pass

    async def destroy_id(self, sandbox_id: str) -> None:
        sandbox = self._sandboxes.get(sandbox_id)
        if sandbox is not None:
            await sandbox.destroy()
        else:
            await self.delete(sandbox_id)

    async def close(self) -> None:
        """Close the HTTP client once clean-ups still under way have finished. Sandboxes are
        left as they are (the sessions destroy theirs)."""
        if self._background:
            await asyncio.wait(set(self._background), timeout=CLEANUP_TIMEOUT_S)
        await self.http.aclose()

    # -- shared with BuddySandbox --

    async def shielded(self, cleanup: Coroutine[Any, Any, None]) -> None:
        """Run a clean-up to its end even if the caller is being cancelled."""
        task = asyncio.ensure_future(cleanup)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        await asyncio.shield(task)

    async def delete(self, sandbox_id: str) -> None:
        """DELETE, never resent blindly: if the answer is lost, one GET says whether it went."""
        what = f"deleting sandbox {sandbox_id}"
        try:
            await self.http.request(
                "DELETE", self.http.sandbox_url(sandbox_id), scope="sandbox", what=what
            )
        except SandboxGone:
            pass  # 404: already gone
        except OutcomeUnknown as exc:
            try:
                await self.power.view(sandbox_id, "checking whether the sandbox was deleted")
            except SandboxGone:
                pass
            else:
                raise SandboxError(f"could not delete sandbox {sandbox_id}: {exc}") from None
        self._sandboxes.pop(sandbox_id, None)

    def forget(self, sandbox_id: str) -> None:
        self._sandboxes.pop(sandbox_id, None)

    # -- internals --

    async def _post_create(self, identifier: str, body: dict[str, Any]) -> str:
        """The new sandbox's id. Never resent: if the outcome is unknown (timeout, 5xx,
        cancellation), the identifier is looked up and a sandbox made by it deleted."""
        try:
            response = await self.http.request(
                "POST",
                self.http.workspace_url("sandboxes"),
                params=self.http.scope_params(),
                json=body,
                scope="project",
                what="creating a sandbox",
                timing="create",
            )
            try:
                sandbox_id = self.http.json_of(response, "creating a sandbox").get("id")
            except SandboxError:
                sandbox_id = None
            if not isinstance(sandbox_id, str) or not sandbox_id:
                raise OutcomeUnknown("Buddy's answer did not include the sandbox's id")
        except OutcomeUnknown as exc:
            await self.shielded(self._remove_identifier(identifier))
            raise SandboxUnavailable(
                f"creating the sandbox failed ({exc}). Try again in a moment."
            ) from None
        except asyncio.CancelledError:
            await self.shielded(self._remove_identifier(identifier))
            raise
        return sandbox_id

    async def _list(self) -> list[dict[str, Any]]:
        """The project's sandboxes as listed (id views: no tags)."""
        response = await self.http.request(
            "GET",
            self.http.workspace_url("sandboxes"),
            params=self.http.scope_params(),
            scope="project",
            what="listing sandboxes",
            idempotent=True,
        )
        items = self.http.json_of(response, "listing sandboxes").get("sandboxes") or []
        return [item for item in items if isinstance(item, dict)]

    async def _delete_quietly(self, sandbox_id: str) -> None:
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                await self.delete(sandbox_id)
        except (BotError, TimeoutError) as exc:
            log.warning("could not delete Buddy sandbox %s: %s", sandbox_id, exc)

    async def _remove_identifier(self, identifier: str) -> None:
        """Delete the sandbox made under `identifier`, if there is one (best effort)."""
        try:
            async with asyncio.timeout(CLEANUP_TIMEOUT_S):
                sandbox_id = await self._find_identifier(identifier)
                if sandbox_id:
                    await self.delete(sandbox_id)
        except (BotError, TimeoutError) as exc:
            log.warning("could not check for a Buddy sandbox named %s: %s", identifier, exc)

    async def _find_identifier(self, identifier: str) -> str | None:
        """Identifier -> id through /identifiers; else by listing (older servers lack it)."""
        params = {"sandbox": identifier, **({"project": p} if (p := self.config.project) else {})}
        with contextlib.suppress(BotError):
            response = await self.http.request(
                "GET",
                self.http.workspace_url("identifiers"),
                params=params,
                scope="project",
                what="looking up a sandbox",
                idempotent=True,
            )
            found = self.http.json_of(response, "looking up a sandbox").get("sandbox_id")
            if isinstance(found, str) and found:
                return found
        for item in await self._list():
            if item.get("identifier") == identifier:
                return str(item.get("id") or "") or None
        return None
