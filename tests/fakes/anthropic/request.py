"""One ``POST /v1/messages`` as the fake received it, with helpers for scripts."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.anthropic.blocks import Block, as_blocks, merge_roles


class ToolResult(dict[str, Any]):
    """A ``tool_result`` block, with helpers."""

    @property
    def tool_use_id(self) -> str:
        return self["tool_use_id"]

    @property
    def is_error(self) -> bool:
        return bool(self.get("is_error"))

    @property
    def text(self) -> str:
        content = self.get("content")
        if content is None:
            return ""
        return "\n".join(b.get("text", "") for b in as_blocks(content) if b.get("type") == "text")


@dataclass
class ModelRequest:
    """One ``POST /v1/messages`` as received. ``body`` and ``sent_messages`` are as sent;
    ``messages`` is what the model sees, after any server-side context edits (cleared tool
    results, history read from the last compaction block, a compaction made on this request),
    and the same as sent when there were none. The helpers read ``messages`` as the model
    does, with consecutive same-role messages merged."""

    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased
    received_at: float = field(default_factory=time.monotonic)
    view: list[dict[str, Any]] | None = None  # the edited messages; None: no edits
    # the response's `context_management.applied_edits`; None: the response has no such key
    applied_edits: list[dict[str, Any]] | None = None
    compaction: str | None = None  # the summary made on this request, if one was

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def retry_count(self) -> int | None:
        """The SDK's ``x-stainless-retry-count`` (0 on a first attempt)."""
        value = self.headers.get("x-stainless-retry-count")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def sent_messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []

    @property
    def merged_sent(self) -> list[dict[str, Any]]:
        """As sent, merged: what thinking seals and the latest-turn check read."""
        return merge_roles(self.sent_messages)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.view if self.view is not None else self.sent_messages

    @property
    def merged_messages(self) -> list[dict[str, Any]]:
        return merge_roles(self.messages)

    @property
    def model_body(self) -> dict[str, Any]:
        """The body the model runs on: ``messages`` in place of the sent ones."""
        return self.body if self.view is None else {**self.body, "messages": self.view}

    @property
    def system_text(self) -> str:
        blocks = as_blocks(self.body.get("system", []))
        return "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")

    @property
    def tools(self) -> list[str]:
        return [t.get("name", "") for t in self.body.get("tools") or []]

    @property
    def last_user_blocks(self) -> list[Block]:
        for message in reversed(self.merged_messages):
            if message.get("role") == "user":
                return as_blocks(message.get("content"))
        return []

    @property
    def last_user_text(self) -> str:
        """The text blocks of the latest user message (a question and any notes before it)."""
        blocks = self.last_user_blocks
        return "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")

    @property
    def turn(self) -> int:
        """Assistant turns already in the conversation."""
        return sum(1 for m in self.merged_messages if m.get("role") == "assistant")

    def tool_results(self) -> list[ToolResult]:
        return [ToolResult(b) for b in self.last_user_blocks if b.get("type") == "tool_result"]
