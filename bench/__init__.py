"""Benchmarks of the bot's own costs, against the fake servers (see docs/performance.md)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def sandbox_root() -> Iterator[Path]:
    """A temporary folder for sandboxes that the sandbox users (uids from 200000 when the
    bot runs as root) can reach; removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o711)
        yield Path(tmp)


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (0..1) by nearest rank; 0.0 for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


CSV_HEADER = b"id,date,region,product,quantity,unit_price,note\n"


def csv_rows(start: int, count: int, quoted: bool = False) -> bytes:
    """Rows `start` to `start + count` of the benchmarks' generated sales CSV (its header:
    CSV_HEADER); `quoted` quotes every field."""
    plain = b"%d,2024-%02d-%02d,%s,%s,%d,%d.%02d,%s\n"
    form = b'"%d","2024-%02d-%02d","%s","%s","%d","%d.%02d","%s"\n' if quoted else plain
    return b"".join(
        form
        % (
            i,
            i % 12 + 1,
            i % 28 + 1,
            (b"north", b"south", b"east", b"west")[i % 4],
            b"widget-%03d" % (i * 7919 % 1000),
            i * 31 % 500,
            i * 17 % 300,
            i % 100,
            b"lorem ipsum dolor" if i % 3 else b"",
        )
        for i in range(start, start + count)
    )
