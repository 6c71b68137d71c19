"""`python -m bot sessions prune [--dry-run] [--vacuum]`: retention now, from the terminal."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bot.compose import build_store
from bot.sessions.pruning import Retention
from bot.settings import load_settings
from bot.store.base import Pruned
from bot.store.sqlite import SqliteStore


async def prune_store(args: argparse.Namespace) -> int:
    """Delete what retention says is done, and print how much; with --dry-run only count."""
    settings = load_settings()
    retention = Retention.from_settings(settings)
    store = build_store(settings)
    await store.open()
    try:
        if retention.off:
            print("Retention is off (SESSION_RETENTION_DAYS=0, AUDIT_RETENTION_DAYS=0).")
        else:
            cutoffs = retention.cutoffs(time.time())
            pruned = await store.prune(*cutoffs, dry_run=args.dry_run)
            print(summary(pruned, retention, dry_run=args.dry_run))
        if args.vacuum and not args.dry_run:
            print(await vacuum(store) if isinstance(store, SqliteStore) else NO_VACUUM)
        return 0
    finally:
        await store.close()


NO_VACUUM = "--vacuum: nothing to do on Redis (it frees the memory of deleted keys itself)."


def summary(pruned: Pruned, retention: Retention, *, dry_run: bool) -> str:
    """ "Removed 3 sessions, 12 runs, 40 tool calls, 2 feedback (...)"."""
    counts = (
        f"{_n(pruned.sessions, 'session')}, {_n(pruned.runs, 'run')}, "
        f"{_n(pruned.tool_calls, 'tool call')}, {pruned.feedback} feedback"
    )
    rules = [
        f"sessions done and quiet for {retention.session_days:g} days"
        if retention.session_days
        else "sessions kept forever",
        f"runs ended {retention.audit_days:g} days ago"
        if retention.audit_days
        else "runs kept forever",
    ]
    return f"{'Would remove' if dry_run else 'Removed'} {counts} ({'; '.join(rules)})."


async def vacuum(store: SqliteStore) -> str:
    before = _size(store.path)
    await store.vacuum()
    return f"VACUUM: {store.path} {_mb(before)} -> {_mb(_size(store.path))}"


def _size(path: Path) -> int:
    """The database's bytes on disk: the file and its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MB"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
