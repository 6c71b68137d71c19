"""SQLite and DuckDB files as connections with no server, through the same suite as
PostgreSQL where it applies: the answer, refusals, the engine's own refusals with the
check bypassed, the timeout and the row cap."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.sql_tools import SqlDesk
from bot.agent.tools import Toolbox, ToolOutcome
from bot.sandbox.base import Sandbox, SandboxSpec
from bot.sql.config import load_connections
from bot.sql.databases import Databases
from bot.sql.query import QueryFailed
from tests.sql.connections import (
    file_entry,
    population_duckdb,
    population_sqlite,
    write_connections,
)
from tests.sql.test_guard import REFUSED
from tests.support import local_provider_at

pytestmark = pytest.mark.timeout(120)

MAKERS = {"sqlite": population_sqlite, "duckdb": population_duckdb}
# With the parser's check bypassed, each engine still refuses these.
ENGINE_REFUSES = {
    "sqlite": {
        "INSERT INTO population VALUES ('x', 'y', 1, 2)": "readonly database",
        "CREATE TABLE t (a int)": "readonly database",
        "ATTACH '{folder}/other.db' AS o": "not authorized",
        "PRAGMA writable_schema = 1": "not authorized",
        "SELECT load_extension('x')": "not authorized",
    },
    "duckdb": {
        "INSERT INTO population VALUES ('x', 'y', 1, 2)": "Cannot execute",
        "CREATE TABLE t (a int)": "Cannot execute",
        "ATTACH '{folder}/other.db' AS o": "disabled by configuration",
        "SELECT * FROM read_csv('/etc/passwd')": "disabled by configuration",
        "COPY population TO '{folder}/out.csv'": "disabled by configuration",
        "SET enable_external_access = true": "locked",
        "INSTALL httpfs": "",
    },
}
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture(params=["sqlite", "duckdb"])
def family(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def sandbox(sandbox_root: Path) -> AsyncIterator[Sandbox]:
    provider = local_provider_at(sandbox_root)
    made = await provider.create(SandboxSpec(session_key="sql-files"))
    yield made
    await made.destroy()
    await provider.close()


def databases(family: str, folder: Path, **limits: object) -> Databases:
    path = MAKERS[family](folder)
    entry = file_entry("local", f"{family}:///{path}", **limits)
    return Databases(load_connections(write_connections(folder, entry), {}))


def toolbox(sandbox: Sandbox, dbs: Databases) -> Toolbox:
    async def get() -> Sandbox:
        return sandbox

    return Toolbox(get, default_timeout_s=20, max_timeout_s=20, output_chars=8000,
                   sql=SqlDesk(dbs, ["local"]))  # fmt: skip


async def run_sql(box: Toolbox, sql: str, save_as: str = "result") -> ToolOutcome:
    return await box.call("run_sql", {"connection": "local", "sql": sql, "save_as": save_as})


async def test_a_query_lands_in_the_sandbox(family: str, sandbox: Sandbox, tmp_path: Path) -> None:
    dbs = databases(family, tmp_path)
    box = toolbox(sandbox, dbs)
    listed = await box.call("list_tables", {"connection": "local"})
    outcome = await run_sql(
        box, "SELECT year, count(*) AS n FROM population GROUP BY year ORDER BY year", "years"
    )
    await dbs.close()
    assert "table population (~795 rows)" in listed.content, listed.content
    assert "country_name" in listed.content and "Aruba" in listed.content
    assert outcome.status == "ok", outcome.content
    text = b"".join([c async for c in sandbox.download("/buddy/work/queries/years.csv")])
    rows = list(csv.reader(io.StringIO(text.decode())))
    assert rows == [["year", "n"], ["2000", "265"], ["2010", "265"], ["2020", "265"]]


async def test_statements_of_its_dialect_are_refused(
    family: str, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(family, tmp_path)
    box = toolbox(sandbox, dbs)
    for dialect, sql, said in REFUSED:
        if dialect == family:
            outcome = await run_sql(box, sql)
            assert outcome.status == "refused" and said.lower() in outcome.content.lower()
    await dbs.close()


async def test_the_engine_refuses_what_the_check_would_miss(family: str, tmp_path: Path) -> None:
    dbs = databases(family, tmp_path)
    for template, said in ENGINE_REFUSES[family].items():
        sql = template.format(folder=tmp_path)
        with pytest.raises(QueryFailed) as caught:
            async with dbs.query("local", sql) as query:
                async for _ in query.csv():
                    pass
                raise QueryFailed(query.error or "ran")
        assert said in str(caught.value) and str(caught.value) != "ran", (sql, caught.value)
    async with dbs.query("local", "SELECT count(*) FROM population") as query:
        counted = b"".join([c async for c in query.csv()])
    await dbs.close()
    assert counted.splitlines()[1] == b"795"  # the table as it was made
    assert not (tmp_path / "other.db").exists() and not (tmp_path / "out.csv").exists()


async def test_an_endless_query_ends_at_the_timeout(
    family: str, sandbox: Sandbox, tmp_path: Path
) -> None:
    dbs = databases(family, tmp_path, timeout_s=1)
    outcome = await run_sql(toolbox(sandbox, dbs), ENDLESS)
    after = await run_sql(toolbox(sandbox, dbs), "SELECT count(*) FROM population")
    await dbs.close()
    assert outcome.is_error, outcome.content
    assert "limit" in outcome.content or "interrupted" in outcome.content.lower()
    assert after.status == "ok" and "795" in after.content  # the connection works on


async def test_rows_stop_at_the_cap(family: str, sandbox: Sandbox, tmp_path: Path) -> None:
    dbs = databases(family, tmp_path, max_rows=1000)
    cross = "SELECT a.year, b.value FROM population a, population b, population c"
    outcome = await run_sql(toolbox(sandbox, dbs), cross)
    await dbs.close()
    assert outcome.status == "ok", outcome.content
    assert "rows: 1,000" in outcome.content and "capped: yes" in outcome.content


async def test_the_sql_runs_off_the_event_loop(
    family: str, sandbox: Sandbox, tmp_path: Path
) -> None:
    """A slow embedded query runs on a thread: the loop goes on meanwhile."""
    dbs = databases(family, tmp_path, timeout_s=1)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    await run_sql(toolbox(sandbox, dbs), ENDLESS)
    ticker.cancel()
    await dbs.close()
    assert ticks > 10
