"""The conversation as a notebook reads it: its questions (with the calls made for each and
the answer), each call's input, and each step's whole output.

The history the model is sent may have lost outputs (cleared) and turns (compacted); the
store's archive keeps what was replaced, so both are read, the archive first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.agent.trim import CLEARED_MARK


@dataclass
class Segment:
    """One question in the conversation: its text, the tool calls made for it, its answer."""

    question: str
    call_ids: set[str] = field(default_factory=set)
    answer: str = ""


@dataclass
class Transcript:
    """What the conversation tells: each call's input and whole output, and the questions."""

    segments: list[Segment]
    inputs: dict[str, dict[str, Any]]
    outputs: dict[str, str]

    @classmethod
    def of(cls, sources: Iterable[Sequence[Mapping[str, Any]]]) -> Transcript:
        """From the archived histories (oldest first) and then the current one: an output
        kept whole anywhere wins over a cleared one; a question seen again (a compaction
        archive holds the turns it replaced) is the same question."""
        found = cls([], {}, {})
        for messages in sources:
            segments = _segments(messages, found)
            # A clearing's archive holds the user turns it replaced, no replies: their
            # outputs are whole, but a question there is told better where it was answered.
            if any(m.get("role") == "assistant" for m in messages):
                found._merge(segments)
        return found

    def _merge(self, segments: list[Segment]) -> None:
        """Add one source's questions; one an earlier source told (by its calls, or else by
        its words) is told once. A question asked twice in one source is asked twice."""
        earlier, taken = len(self.segments), set()
        for segment in segments:
            for i, seen in enumerate(self.segments[:earlier]):
                same = bool(segment.call_ids & seen.call_ids) or (
                    not segment.call_ids and seen.question == segment.question
                )
                if same and i not in taken:
                    taken.add(i)
                    seen.call_ids |= segment.call_ids
                    seen.answer = segment.answer or seen.answer
                    break
            else:
                self.segments.append(segment)

    def output(self, call_id: str) -> str | None:
        return self.outputs.get(call_id)


def _segments(messages: Sequence[Mapping[str, Any]], found: Transcript) -> list[Segment]:
    segments: list[Segment] = []
    asking = False  # the last block was the user's text: more text is the same question
    for message in messages:
        user = message.get("role") == "user"
        if not user and segments:
            _answer(segments[-1], message)
        for block in _blocks(message):
            kind = block.get("type")
            if user and kind == "text":
                if asking:
                    segments[-1].question = block.get("text", "")
                else:
                    segments.append(Segment(block.get("text", "")))
                asking = True
                continue
            asking = False
            if kind == "tool_result":
                _keep_output(found, block)
            elif kind == "tool_use":
                found.inputs[str(block.get("id", ""))] = dict(block.get("input") or {})
                if segments:
                    segments[-1].call_ids.add(str(block.get("id", "")))
    return segments


def _answer(segment: Segment, message: Mapping[str, Any]) -> None:
    """The answer is the text of the question's last reply that made no tool call (a reply
    that makes one says what it does next)."""
    content = _blocks(message)
    if any(b.get("type") == "tool_use" for b in content):
        return
    said = [b.get("text", "").strip() for b in content if b.get("type") == "text"]
    segment.answer = "\n\n".join(t for t in said if t) or segment.answer


def _keep_output(found: Transcript, block: Mapping[str, Any]) -> None:
    content = block.get("content")
    if isinstance(content, list):  # text blocks, as the API also takes them
        content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    call_id = str(block.get("tool_use_id", ""))
    if isinstance(content, str) and not content.startswith(CLEARED_MARK):
        found.outputs[call_id] = content


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]
