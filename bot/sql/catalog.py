"""What a connection holds, for the model: its tables and views, their columns with types,
a row estimate, and a few example values per column (a short data card). Read through
SQLAlchemy's inspector, in a read-only transaction that is rolled back."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.sql.config import ConnectionSpec

MAX_TABLES = 60  # listed with their columns; more are named only
EXAMPLES = 3  # example values per column
EXAMPLE_CHARS = 24
HIDDEN_SCHEMAS = {"information_schema", "pg_catalog", "pg_toast", "main_temp"}


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    name: str  # schema-qualified outside the default schema
    kind: str  # table | view
    rows: int | None  # an estimate; None when unknown
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Catalog:
    tables: tuple[Table, ...]
    more: tuple[str, ...] = ()  # tables past MAX_TABLES, named only

    def describe(self) -> str:
        """The listing as the model reads it."""
        if not self.tables:
            return "No tables or views are visible to this connection."
        lines = []
        for table in self.tables:
            rows = "rows unknown" if table.rows is None else f"~{table.rows:,} rows"
            lines.append(f"{table.kind} {table.name} ({rows})")
            for col in table.columns:
                seen = f"  e.g. {', '.join(col.examples)}" if col.examples else ""
                lines.append(f"  - {col.name} {col.type}{seen}")
        if self.more:
            lines.append(f"… and {len(self.more)} more: {', '.join(self.more)}")
        return "\n".join(lines)


async def read_catalog(spec: ConnectionSpec, engine: AsyncEngine | Engine) -> Catalog:
    async with asyncio.timeout(max(spec.timeout_s, 10) * 2):
        if isinstance(engine, AsyncEngine):
            async with engine.connect() as conn:
                await conn.execution_options(postgresql_readonly=True)
                async with conn.begin() as transaction:
                    catalog = await conn.run_sync(_read, spec.family)
                    await transaction.rollback()
                    return catalog
        return await asyncio.to_thread(_read_sync, engine, spec.family)


def _read_sync(engine: Engine, family: str) -> Catalog:
    with engine.connect() as conn:
        try:
            return _read(conn, family)
        finally:
            conn.rollback()


def _read(conn: Connection, family: str) -> Catalog:
    inspector: Any = _DuckInspector(conn) if family == "duckdb" else inspect(conn)
    default = inspector.default_schema_name
    names: list[tuple[str | None, str, str]] = []
    for schema in inspector.get_schema_names():
        if schema in HIDDEN_SCHEMAS or schema.startswith("pg_"):
            continue
        key: str | None = None if schema == default else schema
        names += [(key, t, "table") for t in inspector.get_table_names(schema=key)]
        names += [(key, v, "view") for v in inspector.get_view_names(schema=key)]
    estimates = _estimates(conn, family)
    tables = []
    for owner, name, kind in names[:MAX_TABLES]:
        table = _table(conn, inspector, owner, name, kind, estimates)
        if table is not None:  # None: the role may not read it
            tables.append(table)
    more = tuple(_qualified(s, n) for s, n, _ in names[MAX_TABLES:])
    return Catalog(tuple(tables), more)


def _table(
    conn: Connection,
    inspector: Any,
    schema: str | None,
    name: str,
    kind: str,
    estimates: dict[str, int] | None,
) -> Table | None:
    qualified = _qualified(schema, name)
    columns = inspector.get_columns(name, schema=schema)
    examples = _examples(conn, schema, name, [c["name"] for c in columns])
    if examples is None:
        return None
    if estimates is not None:
        rows = estimates.get(qualified)
    else:
        rows = _count(conn, schema, name) if kind == "table" else None
    cols = tuple(Column(c["name"], str(c["type"]), examples.get(c["name"], ())) for c in columns)
    return Table(qualified, kind, rows, cols)


class _DuckInspector:
    """The inspector's few calls, through DuckDB's information_schema (duckdb_engine's
    inspector asks for PostgreSQL catalog tables DuckDB lacks)."""

    default_schema_name = "main"

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def _names(self, schema: str | None, kind: str) -> list[str]:
        query = text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = :schema"
            " AND table_type = :kind AND table_catalog = current_database() ORDER BY 1"
        )
        found = self._conn.execute(query, {"schema": schema or "main", "kind": kind})
        return [str(name) for (name,) in found]

    def get_schema_names(self) -> list[str]:
        query = "SELECT DISTINCT table_schema FROM information_schema.tables"
        return [str(s) for (s,) in self._conn.execute(text(query))]

    def get_table_names(self, schema: str | None = None) -> list[str]:
        return self._names(schema, "BASE TABLE")

    def get_view_names(self, schema: str | None = None) -> list[str]:
        return self._names(schema, "VIEW")

    def get_columns(self, name: str, schema: str | None = None) -> list[dict[str, Any]]:
        query = text(
            "SELECT column_name, data_type FROM information_schema.columns WHERE"
            " table_schema = :schema AND table_name = :name ORDER BY ordinal_position"
        )
        found = self._conn.execute(query, {"schema": schema or "main", "name": name})
        return [{"name": str(c), "type": str(t)} for c, t in found]


def _estimates(conn: Connection, family: str) -> dict[str, int] | None:
    """PostgreSQL's planner estimates (free; none for a table never analysed); None
    elsewhere, where tables are counted."""
    if family != "postgresql":
        return None
    query = text(
        "SELECT CASE WHEN n.nspname = current_schema() THEN c.relname"
        " ELSE n.nspname || '.' || c.relname END, c.reltuples::bigint"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE c.relkind IN ('r', 'p', 'm')"
    )
    found = {str(name): int(rows) for name, rows in conn.execute(query)}
    return {name: rows for name, rows in found.items() if rows >= 0}


def _count(conn: Connection, schema: str | None, name: str) -> int | None:
    rows = _tried(conn, f"SELECT count(*) FROM {_quoted(conn, schema, name)}")
    return int(rows[0][0]) if rows else None


def _examples(
    conn: Connection, schema: str | None, name: str, columns: list[str]
) -> dict[str, tuple[str, ...]] | None:
    """A few values per column; None when the table cannot be read."""
    rows = _tried(conn, f"SELECT * FROM {_quoted(conn, schema, name)} LIMIT {EXAMPLES}")
    if rows is None:
        return None
    seen: dict[str, tuple[str, ...]] = {}
    for i, column in enumerate(columns):
        values = [_short(row[i]) for row in rows if i < len(row) and row[i] is not None]
        seen[column] = tuple(dict.fromkeys(values))
    return seen


def _tried(conn: Connection, sql: str) -> list[Any] | None:
    """The rows of `sql`, or None when the role may not read the table. On PostgreSQL in a
    savepoint, since a failed statement spoils the rest of the transaction."""
    nested = conn.begin_nested() if conn.dialect.name == "postgresql" else None
    try:
        rows = list(conn.execute(text(sql)).all())
    except SQLAlchemyError:
        if nested is not None:
            nested.rollback()
        return None
    if nested is not None:
        nested.commit()
    return rows


def _short(value: Any) -> str:
    shown = str(value)
    return shown if len(shown) <= EXAMPLE_CHARS else shown[: EXAMPLE_CHARS - 1] + "…"


def _quoted(conn: Connection, schema: str | None, name: str) -> str:
    quote = conn.dialect.identifier_preparer.quote
    return f"{quote(schema)}.{quote(name)}" if schema else quote(name)


def _qualified(schema: str | None, name: str) -> str:
    return f"{schema}.{name}" if schema else name
