"""How the Buddy backend reads Buddy's sandbox, command and content views, in the terms
both backends report (statuses, exit codes, path errors). Nothing here does I/O."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from bot.errors import SandboxUnavailable
from bot.sandbox.base import KILL_EXIT, ExecStatus, FileEntry, exit_status, wrong_kind

FINISHED = ("SUCCESSFUL", "FAILED")  # a command's final statuses
TIMING_SLACK_S = 1.0  # the client starts its clock a little after the sandbox does
TIMEOUT_EXIT = KILL_EXIT  # GNU `timeout -s KILL` kills its own group, itself too
BOOT_LOG_LINES = 5
ARCHIVE_RE = re.compile(r"filename\*?=(?:UTF-8'')?\"?([^\";]+)", re.IGNORECASE)


def exec_status(
    exit_code: int | None, elapsed_s: float, limit_s: float, *, killed: bool
) -> tuple[ExecStatus, int | None]:
    """(status, exit code) of a finished command, in the terms every backend reports."""
    if exit_code == 0:
        return "ok", 0
    if killed or exit_code is None:  # stopped by us, or by Buddy without an exit code
        return "killed", None
    if exit_code == TIMEOUT_EXIT and elapsed_s >= limit_s - TIMING_SLACK_S:
        return "timeout", None
    return exit_status(exit_code), exit_code


def exit_code_of(view: dict[str, Any]) -> int | None:
    """A command view's exit code; a SUCCESSFUL one without it exited 0."""
    code = view.get("exit_code")
    if isinstance(code, str) and code.lstrip("-").isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        return 0 if view.get("status") == "SUCCESSFUL" else None
    return code


def parse_timestamp(value: Any) -> float | None:
    """Unix seconds of an ISO 8601 date as Buddy writes it; None if there is none."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def booted(view: dict[str, Any]) -> bool:
    """Whether a sandbox view is ready for use (setup SUCCESS, status RUNNING); a failed
    or stale setup or a failed start raises SandboxUnavailable."""
    setup, status = view.get("setup_status"), view.get("status")
    if setup == "FAILED":
        raise SandboxUnavailable(f"the sandbox's setup commands failed{_boot_tail(view)}")
    if setup == "STALE":
        raise SandboxUnavailable("the sandbox's setup commands were changed and not applied")
    if status == "FAILED":
        raise SandboxUnavailable(f"the sandbox failed to start{_boot_tail(view)}")
    return setup == "SUCCESS" and status == "RUNNING"


def _boot_tail(view: dict[str, Any]) -> str:
    lines = [str(line)[:200] for line in view.get("boot_logs") or [] if str(line).strip()]
    return ":\n" + "\n".join(lines[-BOOT_LOG_LINES:]) if lines else ""


def parse_listing(items: list[Any], target: str, shown: str) -> list[FileEntry]:
    """FileEntries of a `content/` answer; a file answers with itself, which is an error."""
    entries = [item for item in items if isinstance(item, dict)]
    if len(entries) == 1 and _is_itself(entries[0], target):
        raise wrong_kind(shown, "folder")
    result = []
    for item in entries:
        name = str(item.get("name") or posixpath.basename(str(item.get("path", ""))))
        size = item.get("size")
        size = size if isinstance(size, int) and not isinstance(size, bool) else 0
        result.append(FileEntry(name, _kind(item.get("type")), size))
    return sorted(result, key=lambda entry: entry.name)


def _kind(value: Any) -> Literal["file", "dir", "other"]:
    kind = str(value or "").upper()
    return "file" if kind == "FILE" else "dir" if kind == "DIR" else "other"


def _is_itself(item: dict[str, Any], target: str) -> bool:
    path = item.get("path")
    if isinstance(path, str) and path:
        return posixpath.normpath(path) == target
    named_so = item.get("name") == posixpath.basename(target)
    return named_so and _kind(item.get("type")) == "file"


def check_is_file(headers: Mapping[str, str], target: str, shown: str) -> None:
    """Buddy sends a folder as a tar.gz archive; a download must be a regular file."""
    match = ARCHIVE_RE.search(headers.get("content-disposition", ""))
    name = match.group(1).strip() if match else ""
    archive = name.endswith((".tar.gz", ".tgz"))
    if archive and not posixpath.basename(target).endswith((".tar.gz", ".tgz")):
        raise wrong_kind(shown, "regular file")
