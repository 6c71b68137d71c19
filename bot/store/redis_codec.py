"""How the Redis store writes records: JSON throughout (ASCII escapes, so lone surrogates
survive as they do in SQLite's JSON columns), free text cleaned as the SQLite store does."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from bot.store.base import (
    FeedbackRecord,
    FileRecord,
    Queued,
    RunRecord,
    SessionRecord,
    ToolCallRecord,
)
from bot.store.values import text

# The session fields save_session writes; granted_usd, cost_usd, prompt_tokens,
# window_tokens, canvas and chart_files are the store's own (the last four absent from older
# hashes).
SESSION_FIELDS = (
    "key", "sandbox_id", "state", "repo_url", "created_at", "last_activity",
)  # fmt: skip
# Fields an earlier version wrote and read (the Slack thread's parts, now only in the key):
# written empty, so a replica of that version still reads a session during a rolling deploy.
_EARLIER_FIELDS = {"team": "", "channel": "", "thread_ts": ""}
RUN_FIELDS = ("key", "run_id", "question", "started_at", "ended_at", "outcome", "user")
_SESSION_FLOATS = ("created_at", "last_activity", "cost_usd", "granted_usd")
_SESSION_INTS = ("prompt_tokens", "window_tokens")
_RUN_FLOATS = ("started_at", "ended_at")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def tail(values: list[Any]) -> str:
    """A JSON array without its opening bracket, for a script to put an id in front:
    tail(["q", 1.5]) is ',"q",1.5]'."""
    return "," + dumps(values)[1:]


def hash_fields(values: dict[str, Any]) -> dict[str, str]:
    return {name: dumps(value) for name, value in values.items()}


def flat(fields: dict[str, str]) -> list[str]:
    """A hash's fields as the field, value, ... list a script takes."""
    return [part for pair in fields.items() for part in pair]


def session_fields(record: SessionRecord) -> dict[str, str]:
    return hash_fields(
        {**_EARLIER_FIELDS, **{name: getattr(record, name) for name in SESSION_FIELDS}}
    )


def session_from(fields: dict[str, str]) -> SessionRecord | None:
    if not fields:
        return None
    values = {name: json.loads(fields[name]) for name in (*SESSION_FIELDS, *_SESSION_FLOATS)}
    ints: dict[str, Any] = {name: int(fields.get(name, "0")) for name in _SESSION_INTS}
    # absent from hashes written before them
    canvas = json.loads(fields.get("canvas", '""'))
    chart_files = json.loads(fields.get("chart_files", '""'))
    return SessionRecord(
        **_floats(values, _SESSION_FLOATS), **ints, canvas=canvas, chart_files=chart_files
    )


def run_fields(key: str, run_id: str, question: str, at: float, user: str) -> dict[str, str]:
    return hash_fields(
        {
            "key": key,
            "run_id": run_id,
            "question": text(question),
            "started_at": at,
            "ended_at": None,
            "outcome": None,
            "user": user,
            "stopped_by": None,
        }
    )


def run_from(fields: dict[str, str] | list[str] | None) -> RunRecord | None:
    if isinstance(fields, list):  # a script's HGETALL: field, value, ...
        fields = dict(zip(fields[::2], fields[1::2], strict=True))
    if not fields:
        return None
    values = {name: json.loads(fields[name]) for name in (*RUN_FIELDS, "stopped_by")}
    figures = tuple(json.loads(fields.get("figures", "[]")))  # absent before it was kept
    return RunRecord(**_floats(values, _RUN_FLOATS), figures=figures)


def file_entry(f: FileRecord) -> str:
    return dumps({**asdict(f), "name": text(f.name)})


def file_from(entry: str) -> FileRecord:
    return FileRecord(**json.loads(entry))


def tool_call_entry(c: ToolCallRecord) -> str:
    return dumps({**asdict(c), "code": text(c.code), "excerpt": text(c.excerpt)})


def tool_call_from(entry: str) -> ToolCallRecord:
    values = json.loads(entry)
    return ToolCallRecord(**_floats(values, ("duration_s", "at")))


def queued_from(entry: str) -> Queued:
    id_, question, user, at = json.loads(entry)
    return Queued(id_, question, user, float(at))


def feedback_entry(run_id: str, user: str, value: str, at: float) -> str:
    return dumps([run_id, user, value, at])


def feedback_from(entry: str) -> FeedbackRecord:
    run_id, user, value, at = json.loads(entry)
    return FeedbackRecord(run_id, user, value, float(at))


def spend_cost(member: str) -> tuple[int, float]:
    """A spend index member, "id:cost", as (id, cost)."""
    id_, cost = member.split(":", 1)
    return int(id_), float(cost)


def _floats(values: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """Numbers as floats, as SQLite's REAL columns give them back (None stays None)."""
    return {k: float(v) if k in names and v is not None else v for k, v in values.items()}
