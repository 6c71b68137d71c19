"""run_sql and list_tables against a real PostgreSQL (a private cluster per test), through
the toolbox into a real sandbox: the answer, the refusals, the timeout, the row cap with
the bot's memory flat, and a server that goes away."""

from __future__ import annotations

import asyncio
import csv
import io
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.sql_tools import SqlDesk
from bot.agent.tools import Toolbox, ToolOutcome
from bot.sandbox.base import Sandbox, SandboxSpec
from bot.scrub import Scrubber
from bot.sql.config import load_connections
from bot.sql.databases import Databases
from bot.sql.query import QueryFailed
from tests.postgres_server import ANALYST_PASSWORD, PostgresServer, postgres_server
from tests.sql.connections import ENV, population_rows, postgres_entry, write_connections
from tests.sql.test_guard import REFUSED
from tests.support import local_provider_at

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def pg() -> AsyncIterator[PostgresServer]:
    async with postgres_server() as server:
        yield server


@pytest.fixture
async def sandbox(sandbox_root: Path) -> AsyncIterator[Sandbox]:
    provider = local_provider_at(sandbox_root)
    made = await provider.create(SandboxSpec(session_key="sql"))
    yield made
    await made.destroy()
    await provider.close()


def databases(pg: PostgresServer, folder: Path, **limits: object) -> Databases:
    path = write_connections(folder, postgres_entry(pg, **limits))
    return Databases(load_connections(path, ENV))


def toolbox(sandbox: Sandbox, dbs: Databases) -> Toolbox:
    async def get() -> Sandbox:
        return sandbox

    return Toolbox(
        get,
        default_timeout_s=20,
        max_timeout_s=20,
        output_chars=8000,
        scrubber=Scrubber(dbs.connections.secrets()),
        sql=SqlDesk(dbs, ["warehouse"], Scrubber(dbs.connections.secrets())),
    )


async def run_sql(box: Toolbox, sql: str, save_as: str = "result") -> ToolOutcome:
    return await box.call("run_sql", {"connection": "warehouse", "sql": sql, "save_as": save_as})


async def sandbox_file(sandbox: Sandbox, path: str) -> str:
    return b"".join([c async for c in sandbox.download(path)]).decode()


async def test_a_query_lands_in_the_sandbox_as_csv(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(pg, tmp_path)
    box = toolbox(sandbox, dbs)
    sql = (
        "SELECT country_name, value FROM population WHERE year = 2020 AND country_code IN "
        "('CHN', 'IND', 'NGA') ORDER BY value DESC"
    )
    outcome = await run_sql(box, sql, "top")
    await dbs.close()

    assert outcome.status == "ok", outcome.content
    assert "saved: /buddy/work/queries/top.csv" in outcome.content
    assert "rows: 3" in outcome.content and "capped: no" in outcome.content
    assert "columns: country_name, value" in outcome.content
    expected = sorted(
        ((name, value) for name, code, year, value in population_rows() if year == 2020
         and code in ("CHN", "IND", "NGA")),
        key=lambda row: -row[1],
    )  # fmt: skip
    assert f"{expected[0][0]} | {expected[0][1]}" in outcome.content  # the preview
    text = await sandbox_file(sandbox, "/buddy/work/queries/top.csv")
    saved = list(csv.reader(io.StringIO(text)))
    assert saved == [["country_name", "value"], *([n, str(v)] for n, v in expected)]
    assert outcome.excerpt == "3 rows from warehouse → queries/top.csv"
    assert ANALYST_PASSWORD not in outcome.content


async def test_list_tables_shows_what_the_role_may_read(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(pg, tmp_path)
    outcome = await toolbox(sandbox, dbs).call("list_tables", {"connection": "warehouse"})
    await dbs.close()
    assert outcome.status == "ok", outcome.content
    assert "table population (~795 rows)" in outcome.content
    assert "- country_name TEXT  e.g. Aruba" in outcome.content
    assert "secrets_log" not in outcome.content  # the role may not read it


async def tables_state(pg: PostgresServer) -> str:
    return await pg.psql(
        "SELECT (SELECT count(*) FROM population), (SELECT note FROM secrets_log),"
        " (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "  WHERE n.nspname = 'public'), (SELECT last_value FROM counter)"
    )


async def test_hostile_statements_are_refused_and_change_nothing(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(pg, tmp_path)
    box = toolbox(sandbox, dbs)
    before = await tables_state(pg)
    for dialect, sql, said in REFUSED:
        if dialect != "postgres" or not sql:  # an empty one is refused by the tool's schema
            continue
        outcome = await run_sql(box, sql)
        assert outcome.is_error and outcome.status == "refused", (sql, outcome.content)
        assert outcome.content.startswith("Refused, nothing was run:"), outcome.content
        assert said.lower() in outcome.content.lower(), (sql, outcome.content)
    await dbs.close()
    assert await tables_state(pg) == before
    assert "queries" not in {e.name for e in await sandbox.list_dir("/buddy/work")}


async def test_the_engine_refuses_writes_the_check_would_miss(
    pg: PostgresServer, tmp_path: Path
) -> None:
    """The second line, with the parser's check bypassed: the role and the read-only
    transaction refuse what a statement hidden from the parser would do."""
    dbs = databases(pg, tmp_path)
    before = await tables_state(pg)
    attempts = {
        "INSERT INTO population VALUES ('x', 'y', 1, 2)": "read-only transaction",
        "SELECT nextval('counter')": "read-only transaction",
        "SELECT pg_read_file('/etc/passwd')": "permission denied",
        "SELECT lo_from_bytea(0, 'x')": "permission denied",
        "SELECT query_to_xml('delete from population', true, true, '')": "not allowed",
        "SELECT set_config('transaction_read_only', 'off', false)": "read-write mode",
        "CREATE TEMP TABLE t AS SELECT 1": "read-only transaction",
        "SELECT * FROM secrets_log": "permission denied",
    }
    for sql, said in attempts.items():
        with pytest.raises(QueryFailed) as caught:
            async with dbs.query("warehouse", sql) as query:
                async for _ in query.csv():
                    pass
                raise QueryFailed(query.error)
        assert said in str(caught.value), (sql, caught.value)
    await dbs.close()
    assert await tables_state(pg) == before


async def test_pg_sleep_ends_at_the_timeout(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(pg, tmp_path, timeout_s=2)
    outcome = await run_sql(toolbox(sandbox, dbs), "SELECT pg_sleep(600)")
    await dbs.close()
    assert outcome.is_error and outcome.status in ("timeout", "error"), outcome.content
    assert "timeout" in outcome.content or "limit" in outcome.content, outcome.content
    # Nothing is left running on the server.
    running = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%'"
    await pg.until(running + " AND pid <> pg_backend_pid()", "0")


async def test_a_huge_cross_join_stops_at_the_row_cap_with_memory_flat(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    # The bot holds up to 8 of the driver's chunks at once (copy_out.QUEUE_CHUNKS), a few
    # MB when the sandbox drains slowly: the result is large enough for that to be small.
    dbs = databases(pg, tmp_path, max_rows=400_000, timeout_s=60)
    box = toolbox(sandbox, dbs)
    sql = (
        "SELECT a.x, b.x AS y, md5(a.x::text || b.x::text) AS h FROM generate_series(1, 10000)"
        " a(x), generate_series(1, 10000) b(x)"
    )  # 100 million rows
    await run_sql(box, "SELECT 1", "warm")  # imports and first connection, outside the count
    tracemalloc.start()
    try:
        outcome = await run_sql(box, sql, "big")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await dbs.close()
    assert outcome.status == "ok", outcome.content
    assert "rows: 400,000" in outcome.content
    assert "capped: yes: stopped at the row cap of 400,000" in outcome.content
    size = next(
        e.size for e in await sandbox.list_dir("/buddy/work/queries") if e.name == "big.csv"
    )
    assert size > 16_000_000  # the whole capped result reached the sandbox …
    assert peak < size / 2, (peak, size)  # … without the bot ever holding it


async def test_a_server_gone_mid_query_is_said_and_the_next_query_reconnects(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(pg, tmp_path, timeout_s=30)
    box = toolbox(sandbox, dbs)
    query = asyncio.create_task(run_sql(box, "SELECT pg_sleep(20)"))
    running = (
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(20)%'"
        " AND pid <> pg_backend_pid()"
    )
    await pg.until(running, "1")
    await pg.stop("immediate")
    outcome = await query
    assert outcome.is_error and outcome.status == "error", outcome.content
    assert "The connection to warehouse was lost while the query ran" in outcome.content
    await pg.start()
    again = await run_sql(box, "SELECT count(*) AS n FROM population")
    await dbs.close()
    assert again.status == "ok", again.content
    assert "rows: 1" in again.content and "795" in again.content


async def test_a_credential_a_table_holds_is_scrubbed_from_result_and_file(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    """The scrubber knows the connection's password: rows that hold it (here made by the
    query itself, which does not spell it whole) reach neither the model nor the sandbox."""
    dbs = databases(pg, tmp_path)
    half = len(ANALYST_PASSWORD) // 2
    sql = (
        f"SELECT 'key=' || '{ANALYST_PASSWORD[:half]}' || '{ANALYST_PASSWORD[half:]}' AS s"
        " FROM generate_series(1, 5000)"
    )
    outcome = await run_sql(toolbox(sandbox, dbs), sql, "leak")
    await dbs.close()
    assert outcome.status == "ok", outcome.content
    saved = await sandbox_file(sandbox, "/buddy/work/queries/leak.csv")
    assert ANALYST_PASSWORD not in outcome.content + saved
    assert "key=[redacted]" in outcome.content
    assert saved.count("key=[redacted]") == 5000


async def test_the_row_cap_is_exact_with_newlines_and_quotes_in_fields(
    pg: PostgresServer, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(pg, tmp_path, max_rows=10)
    box = toolbox(sandbox, dbs)
    sql = "SELECT g, E'line\\nbreak \"q\", done' AS s FROM generate_series(1, {n}) g"
    exact = await run_sql(box, sql.format(n=10), "exact")
    over = await run_sql(box, sql.format(n=11), "over")
    await dbs.close()
    assert "rows: 10" in exact.content and "capped: no" in exact.content, exact.content
    assert "rows: 10" in over.content and "capped: yes" in over.content, over.content
    for name in ("exact", "over"):
        saved = await sandbox_file(sandbox, f"/buddy/work/queries/{name}.csv")
        rows = list(csv.reader(io.StringIO(saved)))
        assert rows[0] == ["g", "s"] and len(rows) == 11
        assert rows[10] == ["10", 'line\nbreak "q", done']
    assert "columns: g, s" in exact.content
