"""Taking files into a sandbox: safe names, and the header line noted on the way through."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

HEADER_MAX_BYTES = 4096
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, taken: set[str]) -> str:
    """A plain file name: no folders, no control or shell characters, no clash with `taken`."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).strip("._") or "file"
    stem, dot, ext = base[:120].rpartition(".")
    stem, ext = (stem, f".{ext}") if dot and stem else (base[:120], "")
    candidate, n = stem + ext, 2
    while candidate in taken:
        candidate, n = f"{stem}-{n}{ext}", n + 1
    return candidate


@dataclass
class Tap:
    """Counts the bytes of a stream and keeps its first line, without holding the stream."""

    size: int = 0
    _head: bytearray = field(default_factory=bytearray)

    async def through(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for chunk in chunks:
            self.size += len(chunk)
            if len(self._head) < HEADER_MAX_BYTES:
                self._head += chunk[: HEADER_MAX_BYTES - len(self._head)]
            yield chunk

    @property
    def header(self) -> str:
        first = bytes(self._head).split(b"\n", 1)[0].rstrip(b"\r")
        if b"\x00" in first:
            return ""
        return first.decode("utf-8", errors="replace").lstrip("\ufeff")
