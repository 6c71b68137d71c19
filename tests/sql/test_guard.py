"""The statement check: exactly one query, nothing that writes, changes the session or
reaches files, programs, the network or other sessions; what it cannot read is refused."""

from __future__ import annotations

import pytest

from bot.sql.guard import refusal

ALLOWED = [
    ("postgres", "SELECT country_name, value FROM population WHERE year = 2020"),
    ("postgres", "WITH a AS (SELECT 1 AS x) SELECT * FROM a"),
    ("postgres", "SELECT 1 UNION ALL SELECT 2"),
    ("postgres", "VALUES (1), (2)"),
    ("postgres", "TABLE population"),
    ("postgres", "EXPLAIN SELECT * FROM population"),
    ("postgres", "SELECT 'a:b' AS s, 2::int, '-- not a comment; DROP TABLE t'"),
    ("postgres", "SELECT pg_sleep(1)"),  # bounded by the timeout, not refused
    ("postgres", "SELECT 1 -- a trailing comment"),
    ("sqlite", "SELECT name FROM pop LIMIT 5"),
    ("duckdb", "SELECT year, sum(value) FROM pop GROUP BY ALL"),
]

REFUSED = [
    ("postgres", "INSERT INTO population VALUES ('x', 'y', 1, 2)", "INSERT"),
    ("postgres", "UPDATE population SET value = 0", "UPDATE"),
    ("postgres", "DELETE FROM population", "DELETE"),
    ("postgres", "DROP TABLE population", "DROP"),
    ("postgres", "CREATE TABLE t (a int)", "CREATE"),
    ("postgres", "ALTER TABLE population ADD COLUMN x int", "ALTER"),
    ("postgres", "TRUNCATE population", "TRUNCATE"),
    ("postgres", "GRANT SELECT ON population TO PUBLIC", "GRANT"),
    ("postgres", "SELECT 1; DROP TABLE population", "one statement"),
    ("postgres", "SELECT 1 /* ; */ ; DROP TABLE population", "one statement"),
    ("postgres", "SELECT 1 --\n; DROP TABLE population", "one statement"),
    ("postgres", "COPY population TO PROGRAM 'id'", "COPY"),
    ("postgres", "COPY population TO '/tmp/x.csv'", "COPY"),
    ("postgres", "SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
    ("postgres", "SELECT PG_READ_BINARY_FILE('/etc/passwd')", "pg_read_binary_file"),
    ("postgres", "SELECT * FROM pg_ls_dir('.')", "pg_ls_dir"),
    ("postgres", "SELECT lo_import('/etc/passwd')", "lo_import"),
    ("postgres", "SELECT lo_from_bytea(0, 'x')", "lo_from_bytea"),
    ("postgres", "SELECT dblink('host=x', 'select 1')", "dblink"),
    ("postgres", "SELECT set_config('role', 'shop_owner', false)", "set_config"),
    ("postgres", "SELECT pg_terminate_backend(1)", "pg_terminate_backend"),
    ("postgres", "SELECT pg_advisory_lock(1)", "pg_advisory_lock"),
    ("postgres", "SELECT nextval('counter')", "nextval"),
    ("postgres", "SELECT query_to_xml('delete from population', true, true, '')", "query_to_xml"),
    ("postgres", "SELECT pg_notify('c', 'x')", "pg_notify"),
    ("postgres", "SET ROLE shop_owner", "SET"),
    ("postgres", "SET transaction_read_only = off", "SET"),
    ("postgres", "RESET ROLE", "RESET"),
    ("postgres", "BEGIN", "TRANSACTION"),
    ("postgres", "COMMIT", "COMMIT"),
    ("postgres", "LISTEN c", "ALIAS"),
    ("postgres", "DO $$ BEGIN DELETE FROM population; END $$", "DO"),
    ("postgres", "SELECT * FROM population FOR UPDATE", "FOR UPDATE"),
    ("postgres", "SELECT * INTO copy_of FROM population", "INTO"),
    ("postgres", "WITH d AS (DELETE FROM population RETURNING *) SELECT * FROM d", "DELETE"),
    ("postgres", "EXPLAIN ANALYZE DELETE FROM population", "EXPLAIN ANALYZE"),
    ("postgres", "EXPLAIN (ANALYZE) SELECT 1", "EXPLAIN ANALYZE"),
    ("postgres", "EXPLAIN DELETE FROM population", "DELETE"),
    ("postgres", "SELECT 1 FROM population WHERE", "could not be read"),
    ("postgres", "", "empty"),
    ("postgres", "-- only a comment", "empty"),
    ("sqlite", "ATTACH 'other.db' AS o", "ATTACH"),
    ("sqlite", "PRAGMA table_info(pop)", "PRAGMA"),
    ("sqlite", "SELECT * FROM pragma_table_info('pop')", "pragma_table_info"),
    ("sqlite", "SELECT load_extension('x')", "load_extension"),
    ("duckdb", "SELECT * FROM read_csv('/etc/passwd')", "read_csv"),
    ("duckdb", "SELECT * FROM read_text('/etc/passwd')", "read_text"),
    ("duckdb", "SELECT * FROM glob('/etc/*')", "glob"),
    ("duckdb", "SELECT * FROM '/etc/passwd'", "by path"),
    ("duckdb", "SELECT * FROM 'data.parquet'", "by path"),
    ("duckdb", "SELECT getenv('HOME')", "getenv"),
    ("duckdb", "INSTALL httpfs", "INSTALL"),
    ("duckdb", "ATTACH 'x.db'", "ATTACH"),
    ("mysql", "SELECT LOAD_FILE('/etc/passwd')", "load_file"),
]


@pytest.mark.parametrize(("dialect", "sql"), ALLOWED)
def test_queries_pass(dialect: str, sql: str) -> None:
    assert refusal(sql, dialect) is None


@pytest.mark.parametrize(("dialect", "sql", "said"), REFUSED)
def test_everything_else_is_refused_with_its_reason(dialect: str, sql: str, said: str) -> None:
    why = refusal(sql, dialect)
    assert why is not None, sql
    assert said.lower() in why.lower(), why
