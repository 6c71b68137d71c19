"""How the fake Buddy reads and checks request bodies and queries (§4.10, §5.1, §5.6, §5.9).

A body may hold only the fields the document lists for its request (`KNOWN`): an unknown
one (a misspelt `timout`) is refused with 400 naming it, as a strict API would, rather
than ignored. The document does not give Buddy's wording; "Unrecognized field" is ours.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.buddy.state import DATA_DIR, OS_VALUES, RESOURCES, RUNTIMES, ApiError

FETCH_TYPES = ("PROJECT_REPO", "PUBLIC_REPO", "ARTIFACT")
# Letters, digits, _ and -; starts with a letter (older docs), never ends with a hyphen.
IDENTIFIER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?<!-)")


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_obj_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) for x in v)


def _is_timeout(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


# Fields a create or PATCH body may set directly, with their checks.
FIELD_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "name": (_is_str, "a string"),
    "identifier": (_is_str, "a string"),
    "os": (_is_str, "a string"),
    "resources": (_is_str, "a string"),
    "first_boot_commands": (_is_str, "a string"),
    "app_dir": (_is_str, "a string"),
    "note": (_is_str, "a string"),
    "agent_note": (_is_str, "a string"),
    "snapshot_id": (_is_str, "a string"),
    "timeout": (_is_timeout, "a positive integer (seconds)"),
    "tags": (is_str_list, "an array of strings"),
    "fetch": (_is_obj_list, "an array of objects"),
    "endpoints": (_is_obj_list, "an array of objects"),
    "variables": (_is_obj_list, "an array of objects"),
    "permissions": (lambda v: isinstance(v, dict), "an object"),
    "apps": (lambda v: is_str_list(v) or _is_obj_list(v), "an array"),
}
PATCHABLE = (
    "apps",
    "name",
    "identifier",
    "resources",
    "first_boot_commands",
    "app_dir",
    "fetch",
    "timeout",
    "tags",
    "endpoints",
    "variables",
    "permissions",
    "note",
    "agent_note",
)
CREATE_FIELDS = (*PATCHABLE, "os", "snapshot_id")
_SHARED = ("name", "identifier", "os", "resources", "first_boot_commands", "app_dir", "apps")
_SHARED += ("tags", "endpoints", "variables", "timeout")
# The fields each request may carry (§5.1 a/b/c, §5.6, §5.9, §5.17).
KNOWN: dict[str, frozenset[str]] = {
    "new sandbox": frozenset((*_SHARED, "fetch", "permissions", "note", "scope", "environment")),
    "sandbox from a snapshot": frozenset((*_SHARED, "snapshot_id")),
    "clone": frozenset(("source_sandbox_id", "name", "identifier")),
    "update": frozenset((*PATCHABLE, "scope", "project", "environment")),
    "command": frozenset(("command", "runtime")),
    "snapshot": frozenset(("name",)),
}


async def peek_json(request: web.Request) -> Any | None:
    """The JSON body for the request log (None for multipart, empty or non-JSON bodies)."""
    if not request.body_exists or request.content_type.startswith("multipart/"):
        return None
    raw = await request.read()  # cached: the handler reads it again
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


async def json_object(request: web.Request) -> dict[str, Any]:
    raw = await request.read()  # cached by the middleware's read
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "The request body must be a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object")
    return body


async def empty_body(request: web.Request) -> None:
    """An action's body (§5.8): nothing, or `{}` as the SDKs send."""
    if await request.read():
        check_known(await json_object(request), frozenset(), "this request")


def check_known(body: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    """400 for the first field `what` does not take."""
    for key in body:
        if key not in allowed:
            raise ApiError(400, f"Unrecognized field '{key}' in {what}")


def int_query(request: web.Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise ApiError(400, f"'{name}' must be an integer from {low} to {high}")
    return int(raw)


def check_fields(body: dict[str, Any]) -> None:
    for key, (ok, what) in FIELD_CHECKS.items():
        if body.get(key) is not None and not ok(body[key]):
            raise ApiError(400, f"'{key}' must be {what}")


def check_enums(body: dict[str, Any]) -> None:
    for key, allowed in (("os", OS_VALUES), ("resources", RESOURCES)):
        if body.get(key) is not None and body[key] not in allowed:
            raise ApiError(400, f"'{key}' must be one of {', '.join(allowed)}")


def check_fetch(items: list[dict[str, Any]]) -> None:
    """One PUBLIC_REPO item into /buddy/data: all the fake can check out."""
    for item in items:
        kind = item.get("type")
        if kind not in FETCH_TYPES:
            raise ApiError(400, f"fetch 'type' must be one of {', '.join(FETCH_TYPES)}")
        if kind != "PUBLIC_REPO":
            raise ApiError(400, f"fetch type {kind} is not supported by the fake")
        if not isinstance(item.get("repository"), str) or not item["repository"]:
            raise ApiError(400, "fetch 'repository' is required for PUBLIC_REPO")
        if item.get("path") not in (None, DATA_DIR):
            raise ApiError(400, f"the fake fetches into {DATA_DIR} only")
    if len(items) > 1:
        raise ApiError(400, "the fake supports a single fetch item")


def check_create(body: dict[str, Any]) -> None:
    """A create body (§5.1): a new sandbox, or one from a snapshot; cloning is refused."""
    if "source_sandbox_id" in body:
        check_known(body, KNOWN["clone"], "a clone request")
        raise ApiError(400, "cloning a sandbox is not supported by the fake")
    kind = "sandbox from a snapshot" if "snapshot_id" in body else "new sandbox"
    check_known(body, KNOWN[kind], f"a {kind} request")
    for key in ("scope", "environment"):
        if key in body:
            raise ApiError(400, f"'{key}' (environment scope) is not supported by the fake")
    required = ("snapshot_id", "name") if "snapshot_id" in body else ("name", "os")
    for key in required:
        if not isinstance(body.get(key), str) or not body[key].strip():
            raise ApiError(400, f"'{key}' is required")
    check_fields(body)
    if body.get("apps") is not None and not is_str_list(body["apps"]):
        raise ApiError(400, "'apps' must be an array of strings")  # commands, on create
    check_enums(body)
    if body.get("fetch"):
        check_fetch(body["fetch"])


def check_patch(body: dict[str, Any]) -> None:
    """A PATCH body (§5.6); null clears a field."""
    check_known(body, KNOWN["update"], "an update request")
    for key in ("scope", "project", "environment"):
        if key in body:
            raise ApiError(400, f"moving a sandbox ('{key}') is not supported by the fake")
    check_fields(body)
    apps = body.get("apps") or []
    if not all(isinstance(app, dict) and isinstance(app.get("command"), str) for app in apps):
        raise ApiError(400, "'apps' must be an array of objects with a 'command'")
    if "name" in body and not body["name"]:
        raise ApiError(400, "'name' is required")
    check_enums(body)
    if body.get("fetch"):
        check_fetch(body["fetch"])


def check_identifier_shape(identifier: str) -> None:
    if not IDENTIFIER_RE.fullmatch(identifier):
        raise ApiError(
            400,
            "'identifier' may contain only letters, digits, '_' and '-', must start "
            "with a letter and must not end with '-'",
        )


def command_body(body: dict[str, Any]) -> tuple[str, str]:
    check_known(body, KNOWN["command"], "a command")
    command, runtime = body.get("command"), body.get("runtime") or "BASH"
    if not isinstance(command, str) or not command:
        raise ApiError(400, "'command' is required")
    if runtime not in RUNTIMES:
        raise ApiError(400, f"'runtime' must be one of {', '.join(RUNTIMES)}")
    if runtime == "TYPESCRIPT":
        raise ApiError(400, f"runtime {runtime} is not supported by the fake")
    return command, runtime
