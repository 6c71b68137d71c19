"""Sizes as people read them."""

from __future__ import annotations


def size_text(size: float) -> str:
    """`size` bytes as "795 bytes", "25.7 KB", "1.2 GB"."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size):,} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
