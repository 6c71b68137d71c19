"""Connections files for tests: a private PostgreSQL, and SQLite and DuckDB files made from
the population slice."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import duckdb

from tests.postgres_server import ANALYST_PASSWORD, PostgresServer
from tests.support import POPULATION_CSV

PASSWORD_ENV = "WAREHOUSE_PASSWORD"


def postgres_entry(server: PostgresServer, *, name: str = "warehouse", **limits: object) -> str:
    fields = {"channels": ["C0SALES"], "timeout_s": 5, **limits}
    return _entry(name, server.url, fields, password_env=PASSWORD_ENV)


def file_entry(name: str, url: str, **limits: object) -> str:
    return _entry(name, url, {"channels": ["*"], "timeout_s": 5, **limits})


def _entry(name: str, url: str, fields: dict[str, object], *, password_env: str = "") -> str:
    lines = [f"[connections.{name}]", f'url = "{url}"', 'description = "World population"']
    if password_env:
        lines.append(f'password_env = "{password_env}"')
    for key, value in fields.items():
        shown = (
            "[" + ", ".join(f'"{v}"' for v in value) + "]"
            if isinstance(value, list)
            else repr(value)
        )
        lines.append(f"{key} = {shown}")
    return "\n".join(lines) + "\n"


def write_connections(folder: Path, *entries: str) -> Path:
    path = folder / "connections.toml"
    path.write_text("\n".join(entries))
    return path


ENV = {PASSWORD_ENV: ANALYST_PASSWORD}


def population_rows() -> list[tuple[str, str, int, int]]:
    with POPULATION_CSV.open(newline="") as handle:
        return [
            (r["Country Name"], r["Country Code"], int(r["Year"]), int(float(r["Value"])))
            for r in csv.DictReader(handle)
        ]


def population_sqlite(folder: Path) -> Path:
    path = folder / "population.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE population (country_name, country_code, year INT, value INT)")
        db.executemany("INSERT INTO population VALUES (?, ?, ?, ?)", population_rows())
    return path


def population_duckdb(folder: Path) -> Path:
    path = folder / "population.duckdb"
    db = duckdb.connect(str(path))
    try:
        db.execute(
            "CREATE TABLE population (country_name TEXT, country_code TEXT, year INT, value BIGINT)"
        )
        db.executemany("INSERT INTO population VALUES (?, ?, ?, ?)", population_rows())
    finally:
        db.close()
    return path
