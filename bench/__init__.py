"""Benchmarks of the bot's own costs, against the fake servers (see docs/performance.md)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def sandbox_root() -> Iterator[Path]:
    """A temporary folder for sandboxes that the sandbox user (uid 65534 when the bot runs
    as root) can reach; removed afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o711)
        yield Path(tmp)


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (0..1) by nearest rank; 0.0 for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0
