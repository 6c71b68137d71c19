"""Buddy's wire formats: sandbox paths in URLs, JSONL command logs, multipart uploads."""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from urllib.parse import quote

from bot.sandbox.output import Sink

MAX_LOG_LINE_BYTES = 4 << 20  # one JSONL record; longer ones are skipped and counted as cut


def encode_path(path: str) -> str:
    """A sandbox path as a URL path tail: no leading '/', each segment percent-encoded."""
    return "/".join(quote(segment, safe="") for segment in path.lstrip("/").split("/"))


class LogParser:
    """Feeds Buddy's JSONL command log (`{"type": "STDOUT"|"STDERR", "data": ...}` per line)
    into two sinks (capped buffers, or a reader of kernel frames).

    Splits on b"\\n" only (a JSON string may hold U+2028, which `splitlines` would split on);
    a line is decoded once it is complete, so a chunk boundary inside a UTF-8 character is
    harmless. A line that arrives whole in one chunk is parsed whatever its size; an
    unfinished line is held up to `max_line` bytes, then the start of its `data` is kept and
    the rest of the line is counted as cut from the stream its start names.
    """

    def __init__(self, stdout: Sink, stderr: Sink, max_line: int = MAX_LOG_LINE_BYTES) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self._max_line = max_line
        self._pending = bytearray()
        self._skipping: Sink | None = None
        self._skipped = 0
        self.bad_lines = 0

    def feed(self, chunk: bytes) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            self._end_line()
            start = end + 1
        self._add(chunk[start:])
        if len(self._pending) > self._max_line:
            self._give_up_line()

    def close(self) -> None:
        """End of stream: a last line without its newline still counts."""
        self._end_line()

    def _add(self, piece: bytes) -> None:
        if self._skipping is not None:
            self._skipped += len(piece)
            return
        self._pending += piece

    def _give_up_line(self) -> None:
        """Keep what can be read of an overlong line; count the rest of it as cut."""
        pending, self._pending = bytes(self._pending), bytearray()
        self._skipping = self._stream_named_in(pending[:256])
        start = _salvage(pending)
        self._skipping.write(start.encode("utf-8", "replace"))
        self._skipped = 0 if start else len(pending)

    def _end_line(self) -> None:
        if self._skipping is not None:
            self._skipping.skip(self._skipped)
            self._skipping.write(b"\n")
            self._skipping, self._skipped = None, 0
            return
        line, self._pending = bytes(self._pending), bytearray()
        if line.strip():
            self._record(line)

    def _record(self, line: bytes) -> None:
        try:
            record = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            record = None
        if not isinstance(record, dict):
            self.bad_lines += 1
            return
        data = record.get("data")
        text = "" if data is None else data if isinstance(data, str) else json.dumps(data)
        target = self.stderr if str(record.get("type", "")).upper() == "STDERR" else self.stdout
        target.write((text + "\n").encode("utf-8", "replace"))

    def _stream_named_in(self, head: bytes) -> Sink:
        match = re.search(rb'"type"\s*:\s*"(\w+)"', head)
        return self.stderr if match and match.group(1).upper() == b"STDERR" else self.stdout


_DATA_START_RE = re.compile(rb'"data"\s*:\s*"')


def _salvage(pending: bytes) -> str:
    """The decoded start of the `data` string of a line cut short ("" if there is none)."""
    match = _DATA_START_RE.search(pending)
    if match is None:
        return ""
    raw = pending[match.end() :].decode("utf-8", "ignore")
    for trim in range(7):  # drop a partial escape such as a lone backslash or "\\u12"
        with contextlib.suppress(ValueError):
            return str(json.loads(f'"{raw[: len(raw) - trim]}"'))
    return ""


def multipart_boundary() -> str:
    return "buddy-" + secrets.token_hex(16)


def multipart_content_type(boundary: str) -> str:
    return f"multipart/form-data; boundary={boundary}"


async def multipart_body(
    filename: str, chunks: AsyncIterator[bytes], boundary: str
) -> AsyncIterator[bytes]:
    """One `file` part around `chunks`, streamed: the file is never held in memory."""
    safe = filename.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
    yield (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="file"; filename="{safe}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    async for chunk in chunks:
        if chunk:
            yield bytes(chunk)
    yield f"\r\n--{boundary}--\r\n".encode()
