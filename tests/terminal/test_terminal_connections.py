"""The terminal's side of SQL connections: `python -m bot connections check`, and
`ask --connection NAME`, which grants one session a connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.cli import main
from tests.fakes.anthropic import Reply, text, tool_use
from tests.postgres_server import ANALYST_PASSWORD, PostgresServer, postgres_server
from tests.sql.connections import (
    PASSWORD_ENV,
    file_entry,
    population_duckdb,
    postgres_entry,
    write_connections,
)
from tests.support import model_in_thread

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def pg() -> AsyncIterator[PostgresServer]:
    async with postgres_server() as server:
        yield server


def cli(monkeypatch, path: Path, *argv: str) -> int:
    monkeypatch.setenv("CONNECTIONS_FILE", str(path))
    return main(list(argv))


async def test_check_says_what_each_connection_sees(
    pg: PostgresServer, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, ANALYST_PASSWORD)
    dead = postgres_entry(pg, name="gone").replace(f":{pg.port}/", ":1/")
    path = write_connections(
        tmp_path,
        postgres_entry(pg),
        dead,
        file_entry("files", f"duckdb:///{population_duckdb(tmp_path)}"),
    )
    code = await asyncio.to_thread(cli, monkeypatch, path, "connections", "check")
    out, err = capsys.readouterr()
    assert code == 1  # one connection failed
    assert f"✓ warehouse (postgresql://analyst:***@127.0.0.1:{pg.port}/shop)" in out
    assert "for C0SALES: sees population" in out
    assert "✓ files" in out and "for *: sees population" in out
    assert "✗ gone" in err and len(err.strip().splitlines()) == 1
    assert ANALYST_PASSWORD not in out + err


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ('url = "oracle://x/y"', "connection 'w', field url: unknown driver 'oracle'"),
        (
            'url = "postgresql://a@h/db"\npassword_env = "UNSET_VAR_X"',
            "connection 'w', field password_env: the variable UNSET_VAR_X is not set",
        ),
    ],
)
def test_a_bad_file_stops_with_one_line(
    tmp_path: Path, monkeypatch, capsys, entry: str, said: str
) -> None:
    path = write_connections(tmp_path, f"[connections.w]\n{entry}\n")
    assert cli(monkeypatch, path, "connections", "check") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(said) and "\n" not in err


def test_ask_refuses_a_connection_the_file_does_not_declare(
    tmp_path: Path, monkeypatch, capsys, sandbox_root: Path
) -> None:
    path = write_connections(tmp_path, file_entry("files", f"sqlite:///{tmp_path}/x.sqlite"))
    monkeypatch.setenv("SANDBOX_ROOT", str(sandbox_root))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    code = cli(monkeypatch, path, "ask", "--connection", "nope", "question")
    assert code == 2
    assert "unknown connection 'nope' (known: files)" in capsys.readouterr().err


def test_ask_with_a_connection_queries_it(
    tmp_path: Path, monkeypatch, capsys, sandbox_root: Path
) -> None:
    def script(req):
        if req.turn == 0:
            assert [t for t in req.tools if t in ("list_tables", "run_sql")] == [
                "list_tables",
                "run_sql",
            ]
            sql = "SELECT count(*) AS n FROM population WHERE year = 2020"
            args = {"connection": "files", "sql": sql, "save_as": "n"}
            return Reply([tool_use("run_sql", args)])
        return Reply([text("Counted: " + req.tool_results()[-1].text.split("\n")[2])])

    path = write_connections(
        tmp_path, file_entry("files", f"duckdb:///{population_duckdb(tmp_path)}", channels=[])
    )
    monkeypatch.chdir(tmp_path)
    with model_in_thread(script) as fake:
        for name, value in {
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": fake.base_url,
            "SANDBOX_BACKEND": "local",
            "SANDBOX_ROOT": str(sandbox_root),
        }.items():
            monkeypatch.setenv(name, value)
        code = cli(monkeypatch, path, "ask", "--connection", "files", "How many rows in 2020?")
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Counted: rows: 1" in out
    assert "1 rows from files → queries/n.csv" in out
