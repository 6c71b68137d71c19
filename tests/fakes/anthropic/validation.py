"""The shape of a request: what every model refuses with a 400 (doc sections 1.1 to 1.4)."""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.anthropic.blocks import Block, as_blocks, merge_roles

API_VERSIONS = ("2023-06-01", "2026-10-21")
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SAMPLING_PARAMS = ("temperature", "top_p", "top_k")
MESSAGE_KEYS = {"role", "content"}


class ApiError(Exception):
    """An error answer; the message names the problem."""

    status = 400
    type = "invalid_request_error"


class InvalidRequest(ApiError):
    """A 400 ``invalid_request_error``."""


class NotFound(ApiError):
    status = 404
    type = "not_found_error"


class TooLarge(ApiError):
    status = 413
    type = "request_too_large"


def validate(body: Any, headers: dict[str, str], *, count_only: bool = False) -> None:
    if not isinstance(body, dict):
        raise InvalidRequest("Request body must be a JSON object")
    version = _validate_headers(headers)
    if "thread" in body:
        raise InvalidRequest(
            "thread: message threads are not supported here; send the full history "
            "on every request (tool runner: thread=False)"
        )
    required = ("model", "messages") if count_only else ("model", "max_tokens", "messages")
    for name in required:
        if name not in body:
            raise InvalidRequest(f"{name}: Field required")
    if not count_only and (not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1):
        raise InvalidRequest("max_tokens: must be a positive integer")
    if version == "2026-10-21":
        for name in SAMPLING_PARAMS:
            if name in body:
                raise InvalidRequest(f"{name}: is not supported under anthropic-version 2026-10-21")
    _validate_tools(body.get("tools"))
    _validate_system(body.get("system"))
    _validate_messages(body["messages"])
    _validate_tool_pairing(merge_roles(body["messages"]))


def _validate_headers(headers: dict[str, str]) -> str:
    version = headers.get("anthropic-version")
    if version is None:
        raise InvalidRequest("anthropic-version: header is required")
    if version not in API_VERSIONS:
        raise InvalidRequest(f"anthropic-version: unknown version {version!r}")
    return version


def _validate_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise InvalidRequest(
                f"tools.{i}.name: String should match pattern '{TOOL_NAME_RE.pattern}'"
            )
        if tool.get("type", "custom") == "custom" and not isinstance(
            tool.get("input_schema"), dict
        ):
            raise InvalidRequest(f"tools.{i}.custom.input_schema: Field required")
        if name in names:
            raise InvalidRequest(f"tools: Tool names must be unique ({name!r})")
        names.add(name)


def _validate_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise InvalidRequest("system: Input should be a valid string or list of text blocks")
    for i, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise InvalidRequest(f"system.{i}: system blocks must be text blocks")


def _validate_messages(messages: Any) -> None:
    """Each message as sent; consecutive same-role messages are fine, the API merges them."""
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: at least one message is required")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise InvalidRequest("messages.0.role: the first message must use the 'user' role")
        # A message is `role` and `content` (doc 1.2); the API's validation refuses any other
        # key (a client's own bookkeeping left on a saved message, say). Its wording is ours.
        for key in sorted(set(message) - MESSAGE_KEYS):
            raise InvalidRequest(f"messages.{i}.{key}: Extra inputs are not permitted")
        _validate_content(i, message.get("content"))


def _validate_content(i: int, content: Any) -> None:
    if isinstance(content, str):
        if not content:
            raise InvalidRequest(f"messages.{i}: text content must be non-empty")
        return
    if not isinstance(content, list) or not content:
        raise InvalidRequest(f"messages.{i}: all messages must have non-empty content")
    for j, block in enumerate(content):
        if not isinstance(block, dict) or "type" not in block:
            raise InvalidRequest(f"messages.{i}.content.{j}: content blocks need a 'type'")
        if block["type"] == "text" and not block.get("text"):
            raise InvalidRequest(f"messages.{i}.content.{j}: text content blocks must be non-empty")
        if block["type"] == "thinking" and not block.get("signature"):
            raise InvalidRequest(f"messages.{i}.content.{j}.signature: Field required")
        if block["type"] == "redacted_thinking" and not block.get("data"):
            raise InvalidRequest(f"messages.{i}.content.{j}.data: Field required")


def _validate_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """On the merged history: indices below count merged messages."""
    seen_ids: set[str] = set()
    for i, message in enumerate(messages):
        blocks = as_blocks(message["content"])
        if message["role"] == "assistant":
            ids = [b.get("id") for b in blocks if b["type"] == "tool_use"]
            if seen_ids.intersection(ids) or len(set(ids)) != len(ids):
                raise InvalidRequest(f"messages.{i}: `tool_use` ids must be unique")
            seen_ids.update(ids)
            if ids and i + 1 < len(messages):
                _check_results(i + 1, as_blocks(messages[i + 1]["content"]), ids)
        elif i == 0 or not any(
            b["type"] == "tool_use" for b in as_blocks(messages[i - 1]["content"])
        ):
            _check_results(i, blocks, [])


def _check_results(i: int, blocks: list[Block], tool_use_ids: list[Any]) -> None:
    """The user message at ``i`` must answer exactly ``tool_use_ids``, results first."""
    result_ids = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
    if missing := [t for t in tool_use_ids if t not in result_ids]:
        raise InvalidRequest(
            f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(map(str, missing))}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )
    if unexpected := [r for r in result_ids if r not in tool_use_ids]:
        raise InvalidRequest(
            f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(map(str, unexpected))}. Each `tool_result` block must have a "
            "corresponding `tool_use` block in the previous message."
        )
    kinds = [b["type"] == "tool_result" for b in blocks]
    if any(kinds) and kinds != sorted(kinds, reverse=True):
        raise InvalidRequest(
            f"messages.{i}: `tool_result` blocks must come first in the message, "
            "before any other content"
        )
