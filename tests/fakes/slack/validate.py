"""``blocks.validate`` in the fake Slack: the message checks (kit.py, surfaces.py) without
posting anything.

It takes exactly one of ``blocks``, ``message`` or ``view``, JSON-encoded (slack_sdk sends
form fields), of at most 100,000 characters; anything else is ``invalid_arguments``. A
failure is ``invalid_blocks``, ``invalid_message`` or ``invalid_view`` after the argument,
with ``errors``: one ``{"code": "failed_constraint", "message", "pointer"}`` per problem,
the pointer relative to what was given (``/0/rows`` for ``blocks``, ``/blocks/0/rows`` for
a message or view).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.slack.common import Json, SlackError
from tests.fakes.slack.kit import block_problems
from tests.fakes.slack.surfaces import SurfaceRules

KINDS = ("blocks", "message", "view")
MAX_ARG = 100_000
PROBLEM_RE = re.compile(r"\[ERROR\] (?P<message>.*) \[json-pointer:(?P<pointer>.*)\]")


def validate(args: Json, rules: SurfaceRules) -> Json:
    """The answer to ``blocks.validate``: ``{}`` (ok) or a SlackError."""
    given = [kind for kind in KINDS if args.get(kind) not in (None, "")]
    if len(given) != 1:
        raise _invalid_arguments(f"must provide exactly one of {', '.join(KINDS)}")
    kind = given[0]
    value = _decoded(args[kind])
    error = f"invalid_{kind}"
    if kind == "blocks":
        if not isinstance(value, list):
            raise SlackError(error, errors=[_error("must be an array", "")])
        problems = block_problems(value, rules=rules)
    else:
        if not isinstance(value, dict) or not isinstance(value.get("blocks", []), list):
            raise SlackError(error, errors=[_error("must be an object with blocks", "")])
        attachments = value.get("attachments") if kind == "message" else None
        problems = block_problems(
            value.get("blocks", []), rules=rules, attachments=attachments or []
        )
    if problems:
        raise SlackError(error, errors=[_parsed(p, strip=kind == "blocks") for p in problems])
    return {}


def _decoded(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    if len(raw) > MAX_ARG:
        raise _invalid_arguments(f"must be at most {MAX_ARG} characters")
    try:
        return json.loads(raw)
    except ValueError:
        raise _invalid_arguments("must be valid JSON") from None


def _invalid_arguments(what: str) -> SlackError:
    return SlackError("invalid_arguments", response_metadata={"messages": [f"[ERROR] {what}"]})


def _error(message: str, pointer: str) -> Json:
    return {"code": "failed_constraint", "message": message, "pointer": pointer}


def _parsed(problem: str, *, strip: bool) -> Json:
    match = PROBLEM_RE.fullmatch(problem)
    message, pointer = (match["message"], match["pointer"]) if match else (problem, "")
    if strip and pointer.startswith("/blocks"):
        pointer = pointer.removeprefix("/blocks") or "/"
    return _error(message, pointer)
