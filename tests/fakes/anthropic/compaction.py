"""``compact_20260112`` (doc 6): server-side compaction, and compaction blocks sent back.

A request is read from its last compaction block on: what came before (earlier messages, and
blocks before it in its own message) is dropped and the model sees the block's summary as a
user text, then whatever follows. A block with ``content: null`` is a no-op (the SDK's
``BetaCompactionBlockParam``). The fake signs the blocks it makes, an HMAC of the summary as
for thinking blocks, so an edited or made-up one is refused.

A prompt past the trigger (default 150,000 tokens) is compacted into a summary, made by a
function of the messages the model would see; the model then answers the summary and the
latest user message. The compaction's own tokens go in ``usage.iterations`` and not in the
top-level usage (doc 1.6).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic.blocks import Block, as_blocks, merge_roles, text, tokens
from tests.fakes.anthropic.validation import InvalidRequest

DEFAULT_TRIGGER = 150_000
CLIP = 300  # characters of each text the default summary keeps
BLOCK_KEYS = {"type", "content", "signature", "encrypted_content", "tool_changes", "cache_control"}

ITERATION_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation",
)

Messages = list[dict[str, Any]]
CompactionFn = Callable[[Messages], str]


def digest(messages: Messages) -> str:
    """The default summary: each user and assistant text, clipped, in order."""
    lines = ["Summary of the conversation so far:"]
    for message in merge_roles(messages):
        for block in as_blocks(message.get("content")):
            if block.get("type") == "text":
                said = block.get("text", "")
                clipped = said if len(said) <= CLIP else said[:CLIP] + "…"
                lines.append(f"{message.get('role')}: {clipped}")
    return "\n".join(lines)


class Compactor:
    """Makes, signs and checks compaction blocks under the fake's secret."""

    def __init__(self, secret: bytes, summarise: CompactionFn = digest) -> None:
        self._secret = secret
        self._summarise = summarise

    def block(self, messages: Messages) -> Block:
        summary = self._summarise(messages)
        if not isinstance(summary, str) or not summary:
            raise TypeError(f"compaction_fn returned {summary!r}, expected a non-empty str")
        return {"type": "compaction", "content": summary, "signature": self._seal(summary)}

    def check(self, messages: Messages) -> None:
        """Every compaction block sent back is one the fake made, unchanged."""
        for i, j, block in _compactions(messages):
            where = f"messages.{i}.content.{j}"
            for key in sorted(set(block) - BLOCK_KEYS):
                raise InvalidRequest(f"{where}.{key}: Extra inputs are not permitted")
            content = block.get("content")
            if content is None:
                continue
            if not isinstance(content, str) or not content:
                raise InvalidRequest(f"{where}.content: compaction content must be non-empty")
            if not hmac.compare_digest(self._seal(content), str(block.get("signature") or "")):
                raise InvalidRequest(f"{where}: Invalid `signature` in `compaction` block")

    def _seal(self, summary: str) -> str:
        mac = hmac.new(self._secret, b"compaction\0" + summary.encode(), hashlib.sha256)
        return base64.b64encode(mac.digest()).decode()


def has_compaction(messages: Messages) -> bool:
    return any(True for _ in _compactions(messages))


def read_from_compaction(messages: Messages) -> Messages | None:
    """The messages as the model reads them, from the last compaction block with content on;
    None when there is none (null ones, no-ops, are dropped all the same)."""
    found = [(i, j, b) for i, j, b in _compactions(messages) if b.get("content") is not None]
    if not found:
        return _without_null(messages) if has_compaction(messages) else None
    i, j, block = found[-1]
    summary = text(block["content"])
    if block.get("cache_control"):  # a breakpoint on the block marks the summary
        summary["cache_control"] = block["cache_control"]
    rest = {**messages[i], "content": as_blocks(messages[i].get("content"))[j + 1 :]}
    return _without_null([{"role": "user", "content": [summary]}, rest, *messages[i + 1 :]])


def compacted(messages: Messages, block: Block) -> Messages:
    """What the model sees once this request is compacted: the summary and the latest user
    message."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    return [{"role": "user", "content": [text(block["content"]), *as_blocks(last.get("content"))]}]


def iterations(summarised: int, block: Block, message: dict[str, Any] | None) -> list[Any]:
    """``usage.iterations``: the compaction (the prompt it read, the summary it wrote), then
    the message's own usage when the model went on to answer."""
    entry = {
        "type": "compaction",
        "input_tokens": summarised,
        "output_tokens": tokens(block["content"]),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if message is None:
        return [entry]
    answer = {k: message[k] for k in ITERATION_KEYS if k in message}
    return [entry, {"type": "message", **answer}]


def _compactions(messages: Messages) -> list[tuple[int, int, Block]]:
    return [
        (i, j, b)
        for i, m in enumerate(messages)
        if isinstance(m, dict)
        for j, b in enumerate(as_blocks(m.get("content")))
        if isinstance(b, dict) and b.get("type") == "compaction"
    ]


def _without_null(messages: Messages) -> Messages:
    """Null compaction blocks dropped, then empty messages, then same-role ones merged."""
    out = []
    for message in messages:
        blocks = as_blocks(message.get("content"))
        kept = [b for b in blocks if b.get("type") != "compaction"]
        if kept:  # a message left unchanged stays as sent, so the cache reads it the same
            out.append(message if len(kept) == len(blocks) else {**message, "content": kept})
    return merge_roles(out)
