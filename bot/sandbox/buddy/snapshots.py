"""Snapshots of a Buddy sandbox's disk (§5.17): taken when a quiet thread's sandbox goes
(SESSION_IDLE_ACTION=snapshot), restored by creating a sandbox with the snapshot's id, and
deleted without their sandbox, which is gone by then.

A snapshot is CREATING, then CREATED or FAILED (§4.7); it is polled as the SDKs poll it
(§6.3), up to SNAPSHOT_WAIT_S. Taking one is never resent (a lost answer could leave two);
a delete that meets 404 found it gone, as the SDKs treat it."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

from bot.errors import SandboxError
from bot.sandbox.base import SnapshotInfo
from bot.sandbox.buddy.http import BuddyHttp
from bot.sandbox.buddy.views import parse_timestamp

SNAPSHOT_WAIT_S = 180.0  # the TypeScript SDK's limit for a snapshot to be CREATED (§6.3)
SNAPSHOT_POLL_MAX_S = 2.0  # and its interval


class BuddySnapshots:
    def __init__(self, http: BuddyHttp, poll_interval_s: float) -> None:
        self._http = http
        self._poll_s = min(poll_interval_s, SNAPSHOT_POLL_MAX_S)

    async def take(self, sandbox_id: str, name: str) -> str:
        """The id of a new snapshot of the sandbox's disk, once it is CREATED."""
        response = await self._http.request(
            "POST", self._http.sandbox_url(sandbox_id, "snapshots"), json={"name": name},
            scope="sandbox", what="taking a snapshot", timing="create",
        )  # fmt: skip
        snapshot_id = self._http.json_of(response, "taking a snapshot").get("id")
        if not isinstance(snapshot_id, str) or not snapshot_id:
            raise SandboxError("Buddy's answer to a snapshot did not include its id")
        try:
            await self._until_created(sandbox_id, snapshot_id)
        except BaseException:
            await asyncio.shield(self.delete(snapshot_id))
            raise
        return snapshot_id

    async def _until_created(self, sandbox_id: str, snapshot_id: str) -> None:
        deadline = time.monotonic() + SNAPSHOT_WAIT_S
        url = self._http.sandbox_url(sandbox_id, "snapshots", quote(snapshot_id, safe=""))
        while True:
            response = await self._http.request(
                "GET", url, scope="sandbox", what="waiting for a snapshot", idempotent=True
            )
            status = self._http.json_of(response, "waiting for a snapshot").get("status")
            if status == "CREATED":
                return
            if status == "FAILED":
                raise SandboxError(f"Buddy could not take snapshot {snapshot_id}")
            if time.monotonic() > deadline:
                raise SandboxError(f"snapshot {snapshot_id} was not ready in time")
            await asyncio.sleep(self._poll_s)

    async def delete(self, snapshot_id: str) -> None:
        """Delete a snapshot by its id alone (§3 #30); one already gone is fine."""
        await self._http.request(
            "DELETE",
            self._http.workspace_url("sandboxes", "snapshots", quote(snapshot_id, safe="")),
            scope="project", what=f"deleting snapshot {snapshot_id}", accept=(404,),
        )  # fmt: skip

    async def list(self, prefix: str) -> list[SnapshotInfo]:
        """The project's snapshots whose name starts with `prefix`, the oldest first."""
        response = await self._http.request(
            "GET", self._http.workspace_url("sandboxes", "snapshots"),
            params=self._http.scope_params(), scope="project", what="listing snapshots",
            idempotent=True,
        )  # fmt: skip
        items = self._http.json_of(response, "listing snapshots").get("snapshots") or []
        found = [
            SnapshotInfo(
                str(item["id"]),
                str(item.get("name") or ""),
                parse_timestamp(item.get("create_date")),
            )
            for item in items
            if isinstance(item, dict)
            and isinstance(item.get("id"), str)
            and str(item.get("name") or "").startswith(prefix)
        ]
        # names the bot gives sort by when they were given, within a second of creation
        return sorted(found, key=lambda s: (s.created_at or 0.0, s.name, s.id))
