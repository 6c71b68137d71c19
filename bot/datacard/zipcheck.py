"""Opening a zip archive (an .xlsx workbook) safely: its directory is checked, from the end
of the file, before any entry is unpacked. zipfile itself stops every entry at the size the
directory declares, so what passes here bounds what reading can unpack."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path
from typing import IO

from bot.datacard.errors import CardError

MAX_TOTAL = 2 << 30  # unpacked bytes of all entries
MAX_RATIO = 200  # unpacked bytes per packed byte, for an entry over RATIO_FLOOR
RATIO_FLOOR = 1 << 20
MAX_ENTRIES = 10_000
READ_CAP = 64 << 20  # unpacked bytes read from one entry where only its start is needed
MAX_DIRECTORY = 4 << 20  # bytes of the central directory (10,000 entries of long names)
_TAIL = 22 + 65535 + 20  # the end record, its comment, and a zip64 locator before them

Source = str | Path | bytes


def open_zip(source: Source, name: str, required: tuple[str, ...] = ()) -> zipfile.ZipFile:
    """The archive, once its directory shows no bomb and holds the `required` entries."""
    _directory_size(source, name)
    try:
        book = zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise CardError(f"Skipped {name}: it is not a readable zip archive ({error}).") from None
    try:
        check(book, name)
        missing = [entry for entry in required if entry not in book.NameToInfo]
        if missing:
            why = f"it is a zip archive without {missing[0]}, not an Excel workbook"
            raise CardError(f"Skipped {name}: {why}.")
    except BaseException:
        book.close()
        raise
    return book


def _directory_size(source: Source, name: str) -> None:
    """Refuse a directory too large to read, from the end record alone: zipfile reads the
    whole directory into objects before anything can count them."""
    if isinstance(source, bytes):
        tail = source[-_TAIL:]
    else:
        try:
            with open(source, "rb") as handle:
                handle.seek(max(0, handle.seek(0, 2) - _TAIL))
                tail = handle.read()
        except OSError:
            return  # zipfile says what is wrong
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) < end + 22:
        return  # zipfile says what is wrong
    entries, size = struct.unpack_from("<10xHI", tail, end)
    locator = end - 20
    if (entries == 0xFFFF or size == 0xFFFFFFFF) and tail[locator : locator + 4] == b"PK\x06\x07":
        entries, size = _zip64_directory(source, struct.unpack_from("<Q", tail, locator + 8)[0])
    if entries > MAX_ENTRIES or size > MAX_DIRECTORY:
        what = f"{entries:,} files" if entries > MAX_ENTRIES else "a directory"
        raise CardError(f"Skipped {name}: it holds {what}, too many to open.")


def _zip64_directory(source: Source, at: int) -> tuple[int, int]:
    """(entries, directory size) from the zip64 end record at offset `at`."""
    if isinstance(source, bytes):
        record = source[at : at + 56]
    else:
        try:
            with open(source, "rb") as handle:
                handle.seek(at)
                record = handle.read(56)
        except OSError:
            return 0, 0
    if len(record) < 56 or not record.startswith(b"PK\x06\x06"):
        return 0, 0  # zipfile says what is wrong
    return struct.unpack_from("<QQ", record, 32)


def check(book: zipfile.ZipFile, name: str) -> None:
    """Refuse an archive that would unpack to too much, in total or for its size."""
    entries = book.infolist()
    if len(entries) > MAX_ENTRIES:
        raise CardError(f"Skipped {name}: it holds {len(entries):,} files, too many to open.")
    total = sum(e.file_size for e in entries)
    if total > MAX_TOTAL:
        raise CardError(
            f"Skipped {name}: it would unpack to {total / 2**30:.1f} GB "
            f"(the limit is {MAX_TOTAL / 2**30:g} GB)."
        )
    for e in entries:
        if e.file_size > RATIO_FLOOR and e.file_size > MAX_RATIO * max(1, e.compress_size):
            ratio = e.file_size // max(1, e.compress_size)
            raise CardError(
                f"Skipped {name}: its part {e.filename} expands {ratio:,} times when unpacked, "
                "which is what a zip bomb does."
            )


class Capped(io.RawIOBase):
    """A read-only view of an entry that raises CardError past `cap` bytes."""

    def __init__(self, raw: IO[bytes], cap: int, what: str) -> None:
        self.raw, self.left, self.what = raw, cap, what

    def readable(self) -> bool:
        return True

    # narrower than RawIOBase's buffer type: zipfile hands it only these
    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.raw.read(min(len(buffer), self.left + 1))
        if len(data) > self.left:
            raise CardError(f"Skipped {self.what}: a part is over {READ_CAP >> 20} MB to read.")
        self.left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def read_part(book: zipfile.ZipFile, entry: str, what: str, cap: int = READ_CAP) -> IO[bytes]:
    """A stream of one entry that will not read more than `cap` bytes."""
    return io.BufferedReader(Capped(book.open(entry), cap, what), 1 << 16)
