"""The steps of reading a JSON document piece by piece: only the array of records is walked
into; each record (and every other value) is parsed whole by the C decoder."""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from bot.datacard.budget import check


class JsonEngine(Protocol):
    """What these steps read and move: the engine in jsonprof that owns them."""

    text: str
    pos: int
    state: str
    stack: list[Any]
    members: Any
    array_key: str | None
    batch: Any
    count: int
    json: Any

    def stop(self, *args: Any) -> Any: ...

    def malformed(self, kind: str, row: int, why: str) -> None: ...


_SPACE = re.compile(r"[ \t\r\n]*")
KEEP = 80  # characters kept of a string value of a top-level object with no array


def advance(e: JsonEngine, final: bool) -> None:
    """Move through `e.text` from `e.pos` as far as whole values allow."""
    steps = 0
    while e.state not in ("stopped", "done"):
        steps += 1
        if not steps % 4096:
            check()
        e.pos = _space_end(e.text, e.pos)
        if e.pos >= len(e.text):
            break
        step = _STEPS[e.state]
        if not step(e, e.text[e.pos], final):
            break
    if e.state == "done":
        _finish(e, final)
    elif final and e.state != "stopped":
        e.stop("The JSON document ends early: profiled up to there.")


def _start(e: JsonEngine, char: str, final: bool) -> bool:
    if char not in "[{":
        e.stop("Not a JSON array or object: not profiled.")
        return False
    e.stack.append(char)
    e.state = "items" if char == "[" else "key"
    e.pos += 1
    return True


def _items(e: JsonEngine, char: str, final: bool) -> bool:
    if char == "]":
        return _close(e)
    value = _value(e, final)
    if value is _WAIT:
        return False
    e.count += 1
    e.batch.append(value)
    e.state = "next item"
    return True


def _next_item(e: JsonEngine, char: str, final: bool) -> bool:
    if char == "]":
        return _close(e)
    if char != ",":
        return _bad(e, "a comma or ] expected")
    e.pos += 1
    e.state = "items"
    return True


def _key(e: JsonEngine, char: str, final: bool) -> bool:
    if char == "}":
        return _close(e)
    key = _value(e, final)
    if key is _WAIT:
        return False
    if not isinstance(key, str):
        return _bad(e, "a key expected")
    e.stack.append(key)
    e.state = "colon"
    return True


def _colon(e: JsonEngine, char: str, final: bool) -> bool:
    if char != ":":
        return _bad(e, "a colon expected")
    e.pos += 1
    e.state = "value"
    return True


def _member(e: JsonEngine, char: str, final: bool) -> bool:
    key = e.stack[-1]
    if char == "[" and e.array_key is None:
        e.array_key = key
        e.stack.append("[")
        e.pos += 1
        e.state = "items"
        return True
    value = _value(e, final)
    if value is _WAIT:
        return False
    e.stack.pop()
    if len(e.members) < 200:
        e.members[key] = _small(value)
    e.state = "next key"
    return True


def _next_key(e: JsonEngine, char: str, final: bool) -> bool:
    if char == "}":
        return _close(e)
    if char != ",":
        return _bad(e, "a comma or } expected")
    e.pos += 1
    e.state = "key"
    return True


def _close(e: JsonEngine) -> bool:
    e.stack.pop()
    e.pos += 1
    if not e.stack:
        e.state = "done"
    else:  # the records array of a top-level object ended
        e.stack.pop()
        e.state = "next key"
    return True


def _finish(e: JsonEngine, final: bool) -> None:
    e.pos = _space_end(e.text, e.pos)
    if e.pos < len(e.text):
        e.stop("Extra data after the JSON document: not profiled.")
    elif e.array_key is None and e.members:  # an object with no array: one record
        e.count = 1
        e.batch.append(e.members)
    e.members = {}


_WAIT = object()


def _value(e: JsonEngine, final: bool) -> Any:
    try:
        value, e.pos = e.json.raw_decode(e.text, e.pos)
    except RecursionError:  # arrays in arrays... deeper than the C decoder goes
        _bad(e, "nested too deeply")
        return _WAIT
    except json.JSONDecodeError as error:
        cut = error.msg.startswith("Unterminated") or error.pos >= len(e.text) - 8
        if final or not cut:
            _bad(e, "not valid JSON")
        return _WAIT  # cut by the end of the block: wait for more
    return value


def _bad(e: JsonEngine, why: str) -> bool:
    e.malformed("invalid", e.count + 1, why)
    e.stop(f"Invalid JSON after record {e.count:,} ({why}): profiled up to there.")
    return False


def _small(value: Any) -> Any:
    if isinstance(value, str):
        return value[:KEEP]
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else value


_STEPS = {
    "start": _start,
    "items": _items,
    "next item": _next_item,
    "key": _key,
    "colon": _colon,
    "value": _member,
    "next key": _next_key,
}


def _space_end(text: str, pos: int) -> int:
    """Where the whitespace at `pos` ends (the pattern matches the empty string too)."""
    match = _SPACE.match(text, pos)
    assert match is not None
    return match.end()
