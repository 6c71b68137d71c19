"""The one place that turns Buddy's answers into project errors whose message says what
to do, and the errors only this backend raises."""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from bot.errors import SandboxConfigError, SandboxError, SandboxGone, SandboxUnavailable
from bot.sandbox.base import path_missing

MESSAGE_MAX_CHARS = 300

GONE_MESSAGE = (
    "the sandbox no longer exists (deleted or timed out); the next message starts a fresh one"
)
SCOPE_HINT = (
    "give BUDDY_TOKEN the scopes WORKSPACE, SANDBOX_READ and SANDBOX_WRITE "
    "(SANDBOX_INFO and SANDBOX_MANAGE in older Buddy versions) and access to the project"
)

# What a request is about decides what a 404 means.
#   project: a workspace/project-level call (404: unknown workspace or project)
#   sandbox: a call on one sandbox (404: the sandbox is gone)
#   command: a call on one command (404: no such command, or the sandbox is gone)
#   path:    a file call (404: no such path, or the sandbox is gone)
Scope = Literal["project", "sandbox", "command", "path"]

_QUOTA_RE = re.compile(
    r"quota|maximum number|too many sandboxes|\blimits?\b.{0,40}\b(reached|exceeded)"
    r"|\b(reached|exceeded)\b.{0,40}\blimits?\b",
    re.IGNORECASE,
)
_PATH_MISSING_RE = re.compile(
    r"not (found|find|exist)|no such (file|dir)|does not exist|doesn't exist", re.IGNORECASE
)


class OutcomeUnknown(SandboxError):
    """A request that must not be resent failed in a way that hides whether it took effect."""


class CommandNotFound(SandboxError):
    """Buddy does not know the command (or, it turns out, the sandbox)."""


class NotRunning(SandboxUnavailable):
    """Buddy refused a call because the sandbox is not running (stopped, or starting)."""


class StreamInterrupted(SandboxError):
    """A streamed answer (logs, download) broke off after it had started."""


def error_text(body: bytes | str) -> str:
    """The human part of an error body: Buddy's `errors[].message`, other JSON's strings, or
    the first line of plain text (HTML pages from gateways are dropped)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    text = text.strip()
    try:
        data = json.loads(text)
    except ValueError:
        line = text.splitlines()[0].strip() if text and not text.startswith("<") else ""
        return line[:MESSAGE_MAX_CHARS]
    if isinstance(data, dict) and isinstance(data.get("errors"), list):
        items = [e.get("message") if isinstance(e, dict) else e for e in data["errors"]]
        messages = [m for m in items if isinstance(m, str)]
    else:
        messages = _strings(data)
    return "; ".join(m.strip() for m in messages if m.strip())[:MESSAGE_MAX_CHARS]


def _strings(data: Any, limit: int = 5) -> list[str]:
    """Up to `limit` string values found anywhere in a JSON document."""
    if isinstance(data, str):
        return [data]
    values = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    found: list[str] = []
    for value in values:
        found += _strings(value, limit - len(found))
        if len(found) >= limit:
            break
    return found[:limit]


def api_error(
    status: int,
    body: bytes | str,
    *,
    scope: Scope,
    what: str,
    subject: str = "",
    workspace: str = "",
    project: str | None = None,
) -> SandboxError:
    """The project error for an unsuccessful answer. `what` names the action ("creating a
    sandbox"); `subject` is the path or command id for path and command scopes."""
    message = error_text(body)
    said = f" (HTTP {status}: {message})" if message else f" (HTTP {status})"
    if status == 401:
        return SandboxConfigError(
            f"Buddy rejected the API token{said}: it is wrong or has expired. Check BUDDY_TOKEN."
        )
    if status == 429:
        return SandboxError(
            f"Buddy is rate limiting this token{said} while {what}; wait a minute and try "
            "again, or ask Buddy support to raise the limit."
        )
    if 400 <= status < 500 and _QUOTA_RE.search(message) and "rate" not in message.lower():
        return SandboxUnavailable(
            f"Buddy's sandbox quota is reached{said}: delete unused sandboxes or ask Buddy "
            "to raise the limit."
        )
    if status == 403:
        if "api is disabled" in message.lower():
            return SandboxConfigError(
                f"The Buddy API is disabled in workspace {workspace!r}{said}: enable the "
                "developer API in the workspace settings."
            )
        return SandboxConfigError(
            f"Buddy refused {what}{said}: the token lacks a scope or permission; {SCOPE_HINT}."
        )
    if status == 404 or (status == 400 and "invalid url" in message.lower()):
        return _not_found(scope, said, subject, workspace, project)
    if status == 400 and scope == "path" and _PATH_MISSING_RE.search(message):
        return path_missing(subject)
    if status == 400 and "not running" in message.lower():
        return NotRunning(
            f"the sandbox is not running{said}; Buddy stops a sandbox after "
            "BUDDY_SANDBOX_TIMEOUT seconds without activity. Try again in a moment."
        )
    if status >= 500:
        return SandboxError(f"Buddy server error while {what}{said}; try again in a moment.")
    return SandboxError(f"Buddy rejected {what}{said}.")


def _not_found(
    scope: Scope, said: str, subject: str, workspace: str, project: str | None
) -> SandboxError:
    if scope == "sandbox":
        return SandboxGone(GONE_MESSAGE)
    if scope == "command":
        return CommandNotFound(f"no such command {subject!r} in this sandbox")
    if scope == "path":
        return path_missing(subject)
    if "snapshot" in said.lower():  # creating from BUDDY_SNAPSHOT
        return SandboxConfigError(
            f"Buddy does not know the snapshot BUDDY_SNAPSHOT names{said}. Check "
            "BUDDY_SNAPSHOT (a snapshot's id, as Buddy lists them), or unset it."
        )
    where = f"workspace {workspace!r}" + (f" or project {project!r}" if project else "")
    return SandboxConfigError(
        f"Buddy does not know {where}{said}. Check BUDDY_WORKSPACE (the part after "
        "app.buddy.works/ in the workspace's address) and BUDDY_PROJECT."
    )
