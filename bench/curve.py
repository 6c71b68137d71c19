"""A line chart as a PNG, written with the standard library alone (the bot's environment has
no plotting package): one coloured line per series on shared axes, a grid line per 10 points
across and per 25% of the top value up; no text (the caller's page says what the lines are)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

COLOURS = ((214, 39, 40), (31, 119, 180), (44, 160, 44), (148, 103, 189))
GRID = (225, 225, 225)
AXIS = (90, 90, 90)
WIDTH, HEIGHT, MARGIN = 800, 400, 30


def write_png(path: Path, series: dict[str, list[int]], *, title: str = "") -> None:
    """`series`: name → values, one per x (question) position; colours in the order given."""
    pixels = [[(255, 255, 255)] * WIDTH for _ in range(HEIGHT)]
    count = max(len(v) for v in series.values())
    top = max(max(v) for v in series.values()) or 1

    def at(i: int, value: float) -> tuple[int, int]:
        x = MARGIN + round(i * (WIDTH - 2 * MARGIN) / max(1, count - 1))
        y = HEIGHT - MARGIN - round(value * (HEIGHT - 2 * MARGIN) / top)
        return x, y

    for i in range(0, count, 10):
        _line(pixels, at(i, 0), at(i, top), GRID)
    for share in (0.25, 0.5, 0.75, 1.0):
        _line(pixels, at(0, top * share), at(count - 1, top * share), GRID)
    _line(pixels, at(0, 0), at(count - 1, 0), AXIS)
    _line(pixels, at(0, 0), at(0, top), AXIS)
    for colour, values in zip(COLOURS, series.values(), strict=False):
        for i in range(1, len(values)):
            _line(pixels, at(i - 1, values[i - 1]), at(i, values[i]), colour, width=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_png(pixels, title))


def _line(pixels: list, a: tuple[int, int], b: tuple[int, int], colour: tuple, width: int = 1):
    steps = max(abs(b[0] - a[0]), abs(b[1] - a[1]), 1)
    for s in range(steps + 1):
        x = a[0] + (b[0] - a[0]) * s // steps
        y = a[1] + (b[1] - a[1]) * s // steps
        for dx in range(width):
            for dy in range(width):
                if 0 <= y + dy < HEIGHT and 0 <= x + dx < WIDTH:
                    pixels[y + dy][x + dx] = colour


def _png(pixels: list, title: str) -> bytes:
    raw = b"".join(b"\0" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", WIDTH, HEIGHT, 8, 2, 0, 0, 0)
    text = chunk(b"tEXt", b"Title\0" + title.encode("latin-1", "replace")) if title else b""
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + text
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )
