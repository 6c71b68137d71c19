"""Message content in the fake Slack, checked as Slack checks it (slack-platform.md §6.1,
§6.2): text and markdown limits, Block Kit rules (kit.py, and surfaces.py for the data
blocks, whose switches arrive as ``SurfaceRules``), metadata, and the rich_text block Slack's
clients attach to what a user types. A second ``table`` in a message is
``invalid_attachments`` with ``only_one_table_allowed``, as Slack is reported to answer."""

from __future__ import annotations

import copy
import re
import string
from collections.abc import Sequence
from typing import Any

from tests.fakes.slack.common import Json, SlackError, json_arg, random_id
from tests.fakes.slack.kit import block_problems
from tests.fakes.slack.surfaces import DEFAULT_RULES, ONLY_ONE_TABLE, SurfaceRules

__all__ = ["block_problems", "checked_blocks", "message_content", "message_metadata"]

MAX_TEXT = 40_000
MAX_MARKDOWN = 12_000  # markdown_text, and all markdown blocks of one message together
MENTION_RE = re.compile(r"<@([A-Z0-9]+)>")


def new_block_id() -> str:
    return random_id(5, string.ascii_letters + string.digits)


def rich_text(text: str) -> list[Json]:
    """The rich_text block Slack's clients attach to what a user types."""
    elements: list[Json] = []
    for i, part in enumerate(MENTION_RE.split(text)):
        if i % 2:
            elements.append({"type": "user", "user_id": part})
        elif part:
            elements.append({"type": "text", "text": part})
    section = {"type": "rich_text_section", "elements": elements}
    return [{"type": "rich_text", "block_id": new_block_id(), "elements": [section]}]


def message_content(args: Json, *, required: bool, rules: SurfaceRules = DEFAULT_RULES) -> Json:
    """The message content of a chat.* call, validated as Slack does.

    Only the fields the call gave are returned, so chat.update can keep the others.
    """
    text = args.get("text")
    markdown = args.get("markdown_text")
    blocks = json_arg(args, "blocks", "invalid_blocks_format")
    attachments = json_arg(args, "attachments", "invalid_attachments")
    if markdown is not None and (text or blocks):
        raise SlackError("markdown_text_conflict")
    if required and not (text or blocks or attachments or markdown):
        raise SlackError("no_text")
    if text is not None and len(str(text)) > MAX_TEXT:
        raise SlackError("msg_too_long")
    if markdown is not None:
        if len(str(markdown)) > MAX_MARKDOWN:
            raise SlackError("msg_too_long")
        return {"text": str(markdown), "blocks": [{"type": "markdown", "text": str(markdown)}]}
    if attachments is not None and not isinstance(attachments, list):
        raise SlackError("invalid_attachments")
    out: Json = {}
    if text is not None:
        out["text"] = str(text)
    if blocks is not None or attachments:
        checked = checked_blocks(blocks or [], rules=rules, attachments=attachments or [])
        if blocks is not None:
            out["blocks"] = checked
    if attachments is not None:
        out["attachments"] = attachments
    return out


def checked_blocks(
    blocks: Any,
    taken_ids: frozenset[str] = frozenset(),
    *,
    rules: SurfaceRules = DEFAULT_RULES,
    attachments: Sequence[Any] = (),
) -> list[Json]:
    """`blocks` as Slack stores them, or ``invalid_blocks`` saying what is wrong (kit);
    `taken_ids`: block_ids the message already has; `attachments`: the message's, whose
    blocks count with its own."""
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format")
    if problems := block_problems(blocks, taken_ids, rules, attachments):
        error = "invalid_attachments" if any(ONLY_ONE_TABLE in p for p in problems) else None
        raise SlackError(error or "invalid_blocks", response_metadata={"messages": problems})
    markdown_total = sum(len(b["text"]) for b in blocks if b["type"] == "markdown")
    if markdown_total > MAX_MARKDOWN and not rules.markdown_per_block:
        raise SlackError("msg_blocks_too_long")
    # Slack fills in missing block_ids (markdown blocks keep none)
    blocks = copy.deepcopy(blocks)
    for block in blocks:
        if block["type"] != "markdown":
            block.setdefault("block_id", new_block_id())
    return blocks


def message_metadata(args: Json) -> Json | None:
    value = json_arg(args, "metadata", "invalid_metadata_format")
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("event_type"), str):
        raise SlackError("invalid_metadata_format")
    return {"event_type": value["event_type"], "event_payload": value.get("event_payload")}


def find_element(message: Json, action_id: str) -> tuple[str, Json]:
    """(block_id, element) of the interactive element ``action_id`` in the message."""
    for block in message.get("blocks") or []:
        candidates = [*(block.get("elements") or []), block.get("accessory") or {}]
        for element in candidates:
            if isinstance(element, dict) and element.get("action_id") == action_id:
                return block.get("block_id", ""), element
    raise LookupError(f"no element with action_id {action_id!r} in message {message.get('ts')}")
