"""What the fake sent, checked when the client sends it back (doc 1.4 and 1.5).

Thinking blocks carry an HMAC of their text (the signature) and redacted thinking blocks a
sealed nonce (their data), both under a secret of the fake, so a changed block or a made-up
one is caught. The seal also covers the model and the conversation up to the block (doc 1.4:
"bound to the model and the conversation"): the visible blocks of every earlier message and
of the same message before it. So a block sent to another model, spliced into another
conversation, or moved within its own message is refused too. Earlier turns may still drop
their thinking: the conversation is read without thinking blocks, which the API need not
keep (doc 6, `clear_thinking`). How the real API binds a block is not documented; this is
the strict reading.

Every assistant message the fake produced is remembered by its model and visible blocks, so
the latest assistant turn can be checked to come back to that model with its thinking blocks
unchanged and in place (another model takes it stripped of them: doc 1.4, "strip or
restart"), and a conversation may end on an assistant turn only after ``pause_turn`` or a
paused compaction (``stop_reason: "compaction"``, doc 1.5: "send back and continue").

One relaxation: the latest turn may also come back to its own model with all of its thinking
stripped when it holds no ``tool_use`` block. Doc 1.4 advises "strip or restart" when history
is rewritten, and a finished answer followed by a new question is history the model no longer
reasons from (doc 6: only the last turn's thinking is kept). A tool loop being continued still
needs its thinking back, as the API requires; a partly stripped or altered turn is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

from tests.fakes.anthropic.blocks import THINKING_KINDS, Block, as_blocks, canonical
from tests.fakes.anthropic.validation import InvalidRequest

# One secret per test process: signatures stay valid across fake servers, as the API's do
# across its machines (a conversation saved by one test server can go on with another).
PROCESS_SECRET = secrets.token_bytes(32)
_NONCE_BYTES = 24

MODIFIED = (
    "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be "
    "modified. These blocks must remain as they were in the original response."
)


def _norm(blocks: list[Block]) -> str:
    """Blocks compared as the API reads them: key order, null fields and markers aside."""
    parts = [{k: v for k, v in b.items() if k != "cache_control" and v is not None} for b in blocks]
    return canonical(parts)


def _visible(blocks: list[Block]) -> str:
    return _norm([b for b in blocks if b.get("type") not in THINKING_KINDS])


def _place(model: str, earlier: list[dict[str, Any]], before: list[Block]) -> bytes:
    """Where a thinking block stands: the model, and the visible conversation before it
    (earlier messages, then the blocks before it in its own message), as a digest."""
    visible = [[m.get("role"), _visible(as_blocks(m.get("content")))] for m in earlier]
    digest = hashlib.sha256(canonical([model, visible, _visible(before)]).encode())
    return digest.digest()


class History:
    """Signs what the server sends; checks what comes back."""

    def __init__(self, secret: bytes = PROCESS_SECRET) -> None:
        self._secret = secret
        # (model, visible blocks) → whole assistant messages. Per model: a turn another model
        # wrote comes back stripped of its thinking, as doc 1.4 says to do.
        self._sent: dict[tuple[str, str], set[str]] = {}
        self._paused: set[str] = set()  # assistant messages that ended in pause_turn

    # -- sending

    def sign(self, model: str, messages: list[dict[str, Any]], content: list[Block]) -> list[Block]:
        """The reply's blocks with a signature on each thinking block and data on each
        redacted one (whatever the script put there is replaced). ``messages`` merged: the
        conversation the reply answers (a paused assistant turn at its end is continued)."""
        last = messages[-1] if messages else {}
        paused = last.get("role") == "assistant"
        earlier = messages[:-1] if paused else messages
        before = as_blocks(last.get("content")) if paused else []
        signed: list[Block] = []
        for block in content:
            where = _place(model, earlier, [*before, *signed])
            if block.get("type") == "thinking":
                payload = where + block["thinking"].encode()
                block = {**block, "signature": self._seal(b"thinking", payload)}
            elif block.get("type") == "redacted_thinking":
                nonce = secrets.token_bytes(_NONCE_BYTES)
                sealed = base64.b64decode(self._seal(b"redacted", where + nonce))
                block = {**block, "data": base64.b64encode(nonce + sealed).decode()}
            signed.append(block)
        return signed

    def remember(
        self, model: str, messages: list[dict[str, Any]], content: list[Block], stop: str
    ) -> None:
        """``messages`` merged; a reply to a paused turn continues that assistant message."""
        last = messages[-1] if messages else {}
        before = as_blocks(last.get("content")) if last.get("role") == "assistant" else []
        whole = [*before, *content]
        self._sent.setdefault((model, _visible(whole)), set()).add(_norm(whole))
        if stop in ("pause_turn", "compaction"):
            self._paused.add(_norm(whole))

    # -- checking

    def check(self, model: str, messages: list[dict[str, Any]]) -> None:
        """``messages`` merged, as the model reads them."""
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        for i in turns:
            blocks = as_blocks(messages[i]["content"])
            self._check_blocks(model, messages[:i], i, blocks, latest=i == turns[-1])
        if turns:
            self._check_latest(model, turns[-1], as_blocks(messages[turns[-1]]["content"]))
        last = messages[-1]
        if last["role"] == "assistant" and _norm(as_blocks(last["content"])) not in self._paused:
            raise InvalidRequest(
                "This model does not support assistant message prefill. "
                "The conversation must end with a user message."
            )

    def _check_blocks(
        self,
        model: str,
        earlier: list[dict[str, Any]],
        i: int,
        blocks: list[Block],
        *,
        latest: bool,
    ) -> None:
        for j, block in enumerate(blocks):
            where = f"messages.{i}.content.{j}"
            place = _place(model, earlier, blocks[:j])
            if block.get("type") == "thinking" and not self._signed(place, block):
                raise InvalidRequest(
                    f"{where}: {MODIFIED}"
                    if latest
                    else f"{where}: Invalid `signature` in `thinking` block"
                )
            if block.get("type") == "redacted_thinking" and not self._sealed(place, block):
                raise InvalidRequest(f"{where}: Invalid `data` in `redacted_thinking` block")

    def _check_latest(self, model: str, i: int, blocks: list[Block]) -> None:
        """The latest assistant turn comes back whole: each thinking block the server sent
        with it, unchanged and in place (1.4). Earlier turns may drop theirs: only the last
        turn's thinking is kept anyway (6, `clear_thinking`). A turn stripped of all its
        thinking passes when it called no tool (the module docstring says why)."""
        kinds = {b.get("type") for b in blocks}
        if not kinds & {*THINKING_KINDS, "tool_use"}:
            return
        sent = self._sent.get((model, _visible(blocks)))
        if sent and _norm(blocks) not in sent:
            raise InvalidRequest(f"messages.{i}: {MODIFIED}")

    def _signed(self, place: bytes, block: Block) -> bool:
        expected = self._seal(b"thinking", place + str(block.get("thinking", "")).encode())
        return hmac.compare_digest(expected, str(block.get("signature", "")))

    def _sealed(self, place: bytes, block: Block) -> bool:
        try:
            raw = base64.b64decode(str(block.get("data", "")), validate=True)
        except ValueError:
            return False
        nonce, seal = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        expected = base64.b64decode(self._seal(b"redacted", place + nonce))
        return hmac.compare_digest(expected, seal)

    def _seal(self, kind: bytes, payload: bytes) -> str:
        digest = hmac.new(self._secret, kind + b"\0" + payload, hashlib.sha256).digest()
        return base64.b64encode(digest).decode()
