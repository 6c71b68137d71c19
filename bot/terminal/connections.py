"""`python -m bot connections check`: connect to each declared connection, run a trivial
read, and say what each can see (its tables) and which channels may use it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bot.sql.config import load_connections
from bot.sql.databases import Databases
from bot.sql.query import describe
from bot.terminal.printable import printable

TRIVIAL = "SELECT 1"


async def check_connections(path: Path | None) -> int:
    """0 when every connection answered; 1 otherwise (each failure said in a line)."""
    connections = load_connections(path)
    if not connections.specs:
        print("No connections declared (CONNECTIONS_FILE is unset or lists none).")
        return 0
    databases = Databases(connections)
    failed = 0
    try:
        for name, spec in connections.specs.items():
            channels = ", ".join(spec.channels) or "no channel (terminal only)"
            try:
                await _trivial(databases, name)
                catalog = await databases.catalog(name)
            except Exception as exc:  # each connection's failure is reported, not raised
                failed += 1
                why = "timed out" if isinstance(exc, TimeoutError) else describe(exc)
                print(printable(f"✗ {name} ({spec.shown_url}): {why}"), file=sys.stderr)
                continue
            tables = ", ".join(t.name for t in catalog.tables) or "no tables"
            print(printable(f"✓ {name} ({spec.shown_url}) for {channels}: sees {tables}"))
    finally:
        await databases.close()
    return 1 if failed else 0


async def _trivial(databases: Databases, name: str) -> None:
    async with asyncio.timeout(databases.spec(name).timeout_s):
        async with databases.query(name, TRIVIAL) as query:
            async for _ in query.csv():
                pass
            if query.error:
                raise RuntimeError(query.error)
