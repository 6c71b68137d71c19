"""An answer's files, as both front ends take them: within a cap per file and a cap for
the whole answer, counted in bytes as they read, whatever disk they hold.

Model code writes these files, so their sizes are hostile: `truncate -s 49M` makes a file
that holds no disk blocks (no disk quota sees it) yet reads as 49 MB of zeros. A file is
left out when its listed size is over a cap (it is not read at all), and again when more
bytes come than the caps leave room for (it grew after the listing): the reader of its
chunks gets `LeftOut` then, and must drop what it kept of that file.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bot.units import size_text

NAMES_SHOWN = 10  # left-out files named one by one in the note; the rest counted


@dataclass(frozen=True)
class OutputCaps:
    file_bytes: int = 50 << 20
    total_bytes: int = 200 << 20


DEFAULT_CAPS = OutputCaps()


class LeftOut(Exception):
    """A file's bytes passed a cap while it was read; `str()` says which."""


@dataclass
class OutputFile:
    """One file of the answer: its safe name and its bytes, or None and why it was left out."""

    name: str
    chunks: AsyncIterator[bytes] | None
    why: str = ""


@dataclass
class OutputBudget:
    """The bytes an answer's files may still take."""

    caps: OutputCaps
    used: int = 0

    def refusal(self, size: int) -> str:
        """Why a file of `size` bytes cannot come, or "" if it fits."""
        if size > self.caps.file_bytes:
            return f"over the {size_text(self.caps.file_bytes)} limit for one file"
        if self.used + size > self.caps.total_bytes:
            return f"the answer's files passed {size_text(self.caps.total_bytes)} in all"
        return ""

    async def capped(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`chunks`, counted: LeftOut once they pass a cap. A file read whole counts."""
        read = 0
        try:
            async for chunk in chunks:
                read += len(chunk)
                why = self.refusal(read)
                if why:
                    raise LeftOut(why)
                yield chunk
        finally:
            await close_stream(chunks)
        self.used += read


def left_out_note(left_out: list[tuple[str, str]], done: str = "attached") -> str:
    """What was not attached (`done`) and why, grouped by reason; "" if nothing."""
    if not left_out:
        return ""
    by_reason: dict[str, list[str]] = {}
    for name, why in left_out:
        by_reason.setdefault(why, []).append(name)
    parts = []
    for why, names in by_reason.items():
        shown = ", ".join(names[:NAMES_SHOWN])
        more = len(names) - NAMES_SHOWN
        if more > 0:
            shown += f" and {more} more"
        parts.append(f"{shown} ({why})")
    return f"Not {done}: " + "; ".join(parts) + "."


async def close_stream(chunks: AsyncIterator[bytes]) -> None:
    """End a stream left early (the sandbox's reader with it)."""
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()


async def write_stream(
    chunks: AsyncIterator[bytes], path: Path, limit: int | None = None
) -> int | None:
    """Write a stream to a host file without blocking the event loop; its size, or None
    (and no file) once it passes `limit`. A failure leaves no file either."""
    handle = await asyncio.to_thread(path.open, "wb")
    size = 0
    try:
        async for chunk in chunks:
            size += len(chunk)
            if limit is not None and size > limit:
                break
            await asyncio.to_thread(handle.write, chunk)
    except BaseException:
        await asyncio.to_thread(path.unlink, missing_ok=True)
        raise
    finally:
        await asyncio.to_thread(handle.close)
    if limit is not None and size > limit:
        await close_stream(chunks)
        await asyncio.to_thread(path.unlink, missing_ok=True)
        return None
    return size
