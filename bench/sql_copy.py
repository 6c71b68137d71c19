"""Benchmark: a query's rows from PostgreSQL into a file in the sandbox, against `psql
\\copy` of the same query to a local file, and the bot's peak memory while it streams them.

Run from the repository root: `.venv/bin/python -m bench.sql_copy [--rows N] [--repeat N]`.
A private PostgreSQL (as the tests start one) gets a table of N rows (1 million by default:
an id, an md5 text, a number and a timestamp). Each side runs the query `--repeat` times;
the medians are printed side by side, in rows per second, with their ratio. The memory
figures come from a run of its own: Python's allocations at their peak (tracemalloc), and
the growth of the process's resident high-water mark over the whole stream.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench import sandbox_root
from bot.sandbox.base import Sandbox, SandboxSpec
from bot.sql.config import load_connections
from bot.sql.databases import Databases
from tests.postgres_server import ANALYST, ANALYST_PASSWORD, DATABASE, postgres_server
from tests.sql.connections import ENV, postgres_entry, write_connections
from tests.support import local_provider_at

QUERY = "SELECT id, h, x, t FROM big ORDER BY id"
TARGET = "/buddy/work/queries/big.csv"


async def bot_copy(dbs: Databases, sandbox: Sandbox) -> tuple[int, float]:
    started = time.perf_counter()
    async with dbs.query("warehouse", QUERY) as query:
        await sandbox.upload(TARGET, query.csv())
        assert not query.error, query.error
        rows = query.result.rows
    return rows, time.perf_counter() - started


async def psql_copy(port: int, folder: Path) -> float:
    out = folder / "psql.csv"
    command = f"\\copy ({QUERY}) TO '{out}' WITH (FORMAT csv, HEADER true)"
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *("psql", "-h", "127.0.0.1", "-p", str(port), "-U", ANALYST, "-d", DATABASE),
        *("-X", "-q", "-c", command),
        env={**os.environ, "PGPASSWORD": ANALYST_PASSWORD},
    )
    assert await proc.wait() == 0
    return time.perf_counter() - started


def max_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def main(rows: int, repeat: int) -> None:
    async with postgres_server() as pg:
        await pg.psql(
            "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS h, g * 0.5 AS x,"
            f" timestamp '2026-01-01' + g * interval '1 second' AS t"
            f" FROM generate_series(1, {rows}) g; GRANT SELECT ON big TO {ANALYST}; ANALYZE big"
        )
        with tempfile.TemporaryDirectory() as tmp, sandbox_root() as root:
            folder = Path(tmp)
            entry = postgres_entry(pg, max_rows=rows * 2, max_bytes=1 << 32, timeout_s=600)
            dbs = Databases(load_connections(write_connections(folder, entry), ENV))
            provider = local_provider_at(root)
            sandbox = await provider.create(SandboxSpec(session_key="bench-sql"))
            try:
                await bot_copy(dbs, sandbox)  # warm: imports, the first connection
                bot_s, psql_s = [], []
                for _ in range(repeat):
                    counted, took = await bot_copy(dbs, sandbox)
                    assert counted == rows, counted
                    bot_s.append(took)
                    psql_s.append(await psql_copy(pg.port, folder))
                rss_before = max_rss_kb()
                tracemalloc.start()
                await bot_copy(dbs, sandbox)
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                rss_growth = max_rss_kb() - rss_before
                size = next(e.size for e in await sandbox.list_dir("/buddy/work/queries"))
            finally:
                await sandbox.destroy()
                await provider.close()
                await dbs.close()
    bot_rate, psql_rate = rows / statistics.median(bot_s), rows / statistics.median(psql_s)
    print(f"{rows:,} rows, {size / 1e6:.1f} MB of CSV; medians of {repeat} runs")
    bot_med, psql_med = statistics.median(bot_s), statistics.median(psql_s)
    print(f"  bot run_sql → sandbox file: {bot_rate:>12,.0f} rows/s ({bot_med:.2f} s)")
    print(f"  psql \\copy → local file:    {psql_rate:>12,.0f} rows/s ({psql_med:.2f} s)")
    print(f"  ratio (bot / psql):          {bot_rate / psql_rate:.2f}")
    print(f"  bot peak Python allocations: {peak / 1e6:.1f} MB (tracemalloc)")
    print(f"  bot resident high-water growth over the stream: {rss_growth / 1024:.1f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.rows, args.repeat))
