"""Files to a thread through Slack's external upload, streamed: for each file
files.getUploadURLExternal (its name and exact length), then its bytes POSTed to the
upload URL; then one files.completeUploadExternal shares them all in the thread.

A file's content is bytes (small ones the bot made) or a host file (an answer's files,
spooled there from the sandbox): it is read in chunks and scrubbed on the way, so no file
is ever whole in memory. The length Slack is told is the scrubbed one, found by a first
pass over the file when there are secrets to scrub (they change the length).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

from bot.scrub import ByteStream, Scrubber
from bot.slack.web.errors import slack_error

CHUNK = 256 << 10
UPLOAD_TIMEOUT = httpx.Timeout(120.0, connect=15.0)  # per read or write, not for the whole body


async def scrubbed(source: bytes | Path, scrubber: Scrubber) -> tuple[int, AsyncIterator[bytes]]:
    """A file's content (bytes, or a host file read in chunks) scrubbed: its length and
    its chunks. Bytes are scrubbed once, so the length told is the length sent."""
    if isinstance(source, bytes):
        clean = scrubber.bytes(source)
        return len(clean), _once(clean)
    length = await asyncio.to_thread(_file_length, source, scrubber)
    return length, _scrubbed_chunks(source, scrubber.stream())


async def post_bytes(
    http: httpx.AsyncClient, url: str, length: int, chunks: AsyncIterator[bytes]
) -> None:
    """Stream a file's bytes to its upload URL (raw bytes, no token: the URL is the key)."""
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(length)}
    response = await http.post(url, content=chunks, headers=headers)
    if response.status_code != 200:
        raise slack_error("files.upload", "upload_failed", response.status_code)


def _file_length(path: Path, scrubber: Scrubber) -> int:
    if not scrubber.has_secrets:
        return path.stat().st_size
    stream = scrubber.stream()
    with path.open("rb") as handle:
        total = sum(len(stream.feed(chunk)) for chunk in _pieces(handle))
    return total + len(stream.end())


def _pieces(handle: Any) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _scrubbed_chunks(source: Path, stream: ByteStream) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(source.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            if out := stream.feed(chunk):
                yield out
    finally:
        await asyncio.to_thread(handle.close)
    if rest := stream.end():
        yield rest
