"""The shell helpers behind upload, download and listing, and the reading of their results.

Each runs in its own container over the sandbox, so symlinks planted in the work folder
resolve inside the sandbox. The path is always "$1", never part of the script.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from bot.errors import SandboxError
from bot.sandbox.base import FILE_SIZE_EXIT, FileEntry, path_missing, wrong_kind
from bot.sandbox.output import READ_CHUNK, CappedBuffer, last_line

UPLOAD_SH = 'mkdir -p -- "${1%/*}" && exec cat > "$1"'
REMOVE_SH = 'exec rm -f -- "$1"'
DOWNLOAD_SH = '[ -e "$1" ] || exit 3; [ -f "$1" ] && [ ! -L "$1" ] || exit 4; exec cat -- "$1"'
LIST_SH = (
    '[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 4; '
    'exec find "$1/" -mindepth 1 -maxdepth 1 -printf "%y %s %f\\0"'
)
EXIT_MISSING, EXIT_WRONG_KIND = 3, 4
FIND_KINDS: dict[bytes, Literal["file", "dir", "link"]] = {b"f": "file", b"d": "dir", b"l": "link"}
LIST_MAX_BYTES = 8 << 20


async def read_at_most(stream: asyncio.StreamReader, limit: int) -> bytes | None:
    """All of `stream`, or None once it exceeds `limit` bytes."""
    data = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        data += chunk
        if len(data) > limit:
            return None
    return bytes(data)


def parse_listing(raw: bytes) -> list[FileEntry]:
    """The entries of LIST_SH's output (`find -printf "%y %s %f\\0"`), by name."""
    entries = []
    for record in raw.split(b"\0"):
        if record:
            kind, size, name = record.split(b" ", 2)
            name_text = name.decode("utf-8", "replace")
            entries.append(FileEntry(name_text, FIND_KINDS.get(kind, "other"), int(size)))
    return sorted(entries, key=lambda entry: entry.name)


def file_error(
    action: str,
    path: str,
    rc: int,
    errors: CappedBuffer,
    *,
    kind: Literal["regular file", "folder"] = "regular file",
) -> SandboxError:
    """The error for a helper that exited `rc` != 0 while trying to `action` `path`."""
    if rc == EXIT_MISSING:
        return path_missing(path)
    if rc == EXIT_WRONG_KIND:
        return wrong_kind(path, kind)
    if rc == FILE_SIZE_EXIT:
        return SandboxError(f"could not {action} {path}: it exceeds the sandbox's file size limit")
    detail = last_line(errors.output().text) or f"exit code {rc}"
    return SandboxError(f"could not {action} {path}: {detail}")
