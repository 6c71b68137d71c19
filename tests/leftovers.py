"""Sandbox processes that outlive their tests: any process whose command line names a
sandbox root the suite made (bwrap binds the session's folders from there; the fake
Buddy runs its commands there). Other suites on the machine use other roots."""

from __future__ import annotations

import os
import time
from pathlib import Path

SANDBOX_ROOTS: list[Path] = []  # every sandbox root made in this run


def survivors(roots: list[Path], grace_s: float = 0.0) -> list[tuple[int, str]]:
    """(pid, command line) of the processes naming one of `roots`, once `grace_s` has let
    the dying ones go."""
    deadline = time.monotonic() + grace_s
    while True:
        found = _naming(roots)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.1)


def _naming(roots: list[Path]) -> list[tuple[int, str]]:
    needles = [str(root) for root in roots]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if command and any(needle in command for needle in needles):
            found.append((int(entry), command))
    return found
