"""The message the fake answers with: its content, usage (doc 1.6) and context management."""

from __future__ import annotations

from typing import Any

from tests.fakes.anthropic.blocks import THINKING_KINDS, Block, random_id, thinking
from tests.fakes.anthropic.cache import PromptCache, output_usage, zero_input_usage
from tests.fakes.anthropic.compaction import iterations
from tests.fakes.anthropic.faults import Reply
from tests.fakes.anthropic.models import thinks
from tests.fakes.anthropic.request import ModelRequest

# What a thinking model thinks when the script did not say (a summary, doc 1.4).
AUTO_THOUGHT = "Working out the next step."

Compaction = tuple[Block, int]  # the block, and the prompt size it summarised


def with_thought(req: ModelRequest, content: list[Block]) -> list[Block]:
    """A model that thinks starts every reply with a thinking block: the script's own, or
    one made here (empty under `display: "omitted"`, doc 1.2)."""
    if not thinks(str(req.model), req.body):
        return content
    if content and content[0].get("type") in THINKING_KINDS:
        return content
    mode = req.body.get("thinking")
    omitted = isinstance(mode, dict) and mode.get("display") == "omitted"
    return [thinking("" if omitted else AUTO_THOUGHT), *content]


def reply_blocks(req: ModelRequest, reply: Reply, compaction: Compaction | None) -> list[Block]:
    """The reply's blocks before signing; a compaction block opens the reply (doc 6), alone
    when the edit pauses after compacting."""
    blocks = [] if reply.stop_reason == "compaction" else with_thought(req, reply.content)
    return blocks if compaction is None else [compaction[0], *blocks]


def message(
    cache: PromptCache,
    req: ModelRequest,
    reply: Reply,
    content: list[Block],
    compaction: Compaction | None = None,
) -> dict[str, Any]:
    edits = req.applied_edits
    return {
        "id": random_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": reply.stop_sequence,
        "stop_details": reply.stop_details,
        "usage": _usage(cache, req, reply, content, compaction),
        **({} if edits is None else {"context_management": {"applied_edits": edits}}),
    }


def _usage(
    cache: PromptCache,
    req: ModelRequest,
    reply: Reply,
    content: list[Block],
    compaction: Compaction | None,
) -> dict[str, Any]:
    """Of the prompt the model read. A compaction's own tokens go in ``iterations`` only
    (doc 1.6); a reply paused after compacting ran no message iteration, so its top-level
    usage is 0 (an assumption: the doc says only what it leaves out)."""
    paused = reply.stop_reason == "compaction"
    if compaction is not None and paused:
        usage = {**zero_input_usage(), "output_tokens": 0}
    else:
        answered = [b for b in content if b.get("type") != "compaction"]
        usage = {**cache.input_usage(req.model_body), **output_usage(answered)}
    usage = {**usage, "service_tier": "standard", **(reply.usage or {})}
    if compaction is not None:
        usage["iterations"] = iterations(compaction[1], compaction[0], None if paused else usage)
    return usage
