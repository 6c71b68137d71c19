"""The JSON views the fake Buddy answers with (§4), built from its state."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from tests.fakes.buddy.state import FakeCommand, FakeSandbox, FakeSnapshot, compact


@dataclass
class Views:
    base_url: str
    workspace: str
    project: str

    def ws_url(self) -> str:
        return f"{self.base_url}/workspaces/{self.workspace}"

    def project_html(self) -> str:
        return f"https://app.buddy.works/{self.workspace}/{self.project}/sandboxes"

    def sandbox_url(self, sb: FakeSandbox) -> str:
        return f"{self.ws_url()}/sandboxes/{sb.id}"

    def id_view(self, sb: FakeSandbox) -> dict[str, Any]:
        return compact(
            {
                "url": self.sandbox_url(sb),
                "html_url": f"{self.project_html()}/{sb.id}",
                "id": sb.id,
                "identifier": sb.identifier,
                "name": sb.name,
                "status": sb.status,
                "setup_status": sb.setup_status,
            }
        )

    def sandbox(self, sb: FakeSandbox) -> dict[str, Any]:
        project = {"name": self.project, "display_name": self.project, "status": "ACTIVE"}
        return self.id_view(sb) | compact(
            {
                "os": sb.os,
                "resources": sb.resources,
                "first_boot_commands": sb.first_boot_commands,
                "app_dir": sb.app_dir,
                "apps": sb.apps,
                "fetch": sb.fetch,
                "timeout": sb.timeout,
                "tags": sb.tags,
                "boot_logs": sb.boot_logs,
                "endpoints": sb.endpoints,
                "variables": sb.variables,
                "permissions": sb.permissions,
                "note": sb.note,
                "agent_note": sb.agent_note,
                "scope": "PROJECT",
                "project": project,
                "create_date": sb.create_date,
            }
        )

    def command(self, sb: FakeSandbox, cmd: FakeCommand) -> dict[str, Any]:
        url = f"{self.sandbox_url(sb)}/commands/{cmd.id}"
        return {
            "url": url,
            "html_url": f"{self.project_html()}/{sb.id}/commands/{cmd.id}",
            "id": cmd.id,
            "command": cmd.command,
            "runtime": cmd.runtime,
            "status": cmd.status,
            "exit_code": cmd.exit_code,
            "start_date": cmd.start_date,
            "finish_date": cmd.finish_date,
            "logs_url": f"{url}/logs",
        }

    def snapshot(self, snap: FakeSnapshot) -> dict[str, Any]:
        url = f"{self.ws_url()}/sandboxes/{snap.sandbox_id}/snapshots/{snap.id}"
        return compact(
            {
                "url": url,
                "html_url": f"{self.project_html()}/{snap.sandbox_id}/snapshots/{snap.id}",
                "id": snap.id,
                "name": snap.name,
                "size": snap.size,  # GB, as an integer
                "status": snap.status,
                "create_date": snap.create_date,
            }
        )

    def entry_item(
        self, sb: FakeSandbox, folder: str, name: str, kind: str, size: int
    ) -> dict[str, Any]:
        """A listed entry: a DIR has no size."""
        path = posixpath.join(folder, name)
        if kind == "DIR":
            return self.item(sb, path, "DIR")
        return self.item(sb, path, "FILE") | {"size": size}

    def item(self, sb: FakeSandbox, path: str, kind: str) -> dict[str, Any]:
        rel = path.lstrip("/")
        return {
            "url": f"{self.sandbox_url(sb)}/content/{rel}",
            "html_url": f"{self.project_html()}/{sb.id}/files/{rel}",
            "type": kind,
            "name": posixpath.basename(path),
            "path": path,
        }
