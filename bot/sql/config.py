"""SQL connections as an operator declares them: a TOML file (CONNECTIONS_FILE) of named
entries, each a SQLAlchemy URL without its secret, the variable that holds the secret, the
channels that may use it, and its limits.

A bad file, an unknown driver or a missing variable stops start-up with one line naming the
connection and the field. The secret is read here once and kept out of every string this
module makes (`repr` and `str` of a URL print `***`).
"""

from __future__ import annotations

import importlib.util
import os
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from bot.errors import ConfigError

Family = Literal["postgresql", "sqlite", "duckdb", "mysql", "snowflake", "bigquery"]
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,39}$")
ALL_CHANNELS = "*"

# What each family needs installed, and the sqlglot dialect that reads its SQL.
DRIVERS: dict[str, tuple[Family, str]] = {
    "postgresql": ("postgresql", "asyncpg"),
    "postgresql+asyncpg": ("postgresql", "asyncpg"),
    "sqlite": ("sqlite", "sqlite3"),
    "sqlite+pysqlite": ("sqlite", "sqlite3"),
    "duckdb": ("duckdb", "duckdb_engine"),
    "mysql+pymysql": ("mysql", "pymysql"),
    "mysql": ("mysql", "pymysql"),
    "snowflake": ("snowflake", "snowflake.sqlalchemy"),
    "bigquery": ("bigquery", "sqlalchemy_bigquery"),
}
SQLGLOT_DIALECT: dict[Family, str] = {
    "postgresql": "postgres",
    "sqlite": "sqlite",
    "duckdb": "duckdb",
    "mysql": "mysql",
    "snowflake": "snowflake",
    "bigquery": "bigquery",
}
KNOWN_KEYS = {
    "url",
    "password_env",
    "description",
    "channels",
    "max_rows",
    "timeout_s",
    "preview_rows",
    "max_bytes",
    "max_bytes_billed",
}


@dataclass(frozen=True)
class ConnectionSpec:
    """One declared connection. `url` holds the secret once read (never printed)."""

    name: str
    url: URL = field(repr=False)
    family: Family
    description: str = ""
    channels: tuple[str, ...] = ()
    max_rows: int = 100_000  # rows into the sandbox file
    timeout_s: float = 30.0  # the statement's, and the whole query's
    preview_rows: int = 20  # rows shown to the model
    max_bytes: int = 256 << 20  # bytes of the sandbox file
    max_bytes_billed: int | None = None  # BigQuery's scan cap
    password_env: str = ""
    secret: str = field(default="", repr=False)

    @property
    def dialect(self) -> str:
        """sqlglot's name for the SQL this connection speaks."""
        return SQLGLOT_DIALECT[self.family]

    @property
    def shown_url(self) -> str:
        """The URL with any password masked: for people and the model."""
        return self.url.render_as_string(hide_password=True)

    def allowed_in(self, channel: str) -> bool:
        """Whether a thread in `channel` may use it: listed, or "*" for every channel but
        direct messages, which must be listed by id."""
        if channel in self.channels:
            return True
        return ALL_CHANNELS in self.channels and bool(channel) and not channel.startswith("D")


@dataclass(frozen=True)
class Connections:
    """The declared connections, by name."""

    specs: Mapping[str, ConnectionSpec] = field(default_factory=dict)

    def allowed_in(self, channel: str) -> tuple[str, ...]:
        """The names a thread in `channel` may use (and is told of)."""
        return tuple(n for n, s in self.specs.items() if s.allowed_in(channel))

    def named(self, names: Sequence[str]) -> tuple[str, ...]:
        """`names` checked against the file (the terminal's --connection)."""
        for name in names:
            if name not in self.specs:
                known = ", ".join(self.specs) or "none declared"
                raise ConfigError(f"unknown connection {name!r} (known: {known})")
        return tuple(names)

    def secrets(self) -> list[str]:
        return [s.secret for s in self.specs.values() if s.secret]


@dataclass(frozen=True)
class Scope:
    """Which connections a session may use, by its key: those its channel may (`place_of`
    tells a key's channel, for front ends with channels), else those `granted` (the
    terminal's --connection)."""

    place_of: Callable[[str], str | None] = field(default=lambda _key: None)
    granted: tuple[str, ...] = ()

    def allowed(self, connections: Connections, key: str) -> tuple[str, ...]:
        place = self.place_of(key)
        return connections.allowed_in(place) if place else connections.named(self.granted)


def load_connections(path: Path | None, environ: Mapping[str, str] | None = None) -> Connections:
    """The file at `path` (None: no connections), checked whole."""
    if path is None:
        return Connections()
    environ = os.environ if environ is None else environ
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"CONNECTIONS_FILE {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"CONNECTIONS_FILE {path}: not valid TOML ({exc})") from None
    entries = data.get("connections", {})
    extra = set(data) - {"connections"}
    if extra or not isinstance(entries, dict):
        raise ConfigError(f"CONNECTIONS_FILE {path}: only [connections.NAME] tables belong there")
    return Connections({name: _spec(name, entry, environ) for name, entry in entries.items()})


def _spec(name: str, entry: Any, environ: Mapping[str, str]) -> ConnectionSpec:
    def bad(field_name: str, why: str) -> ConfigError:
        return ConfigError(f"connection {name!r}, field {field_name}: {why}")

    if not NAME.match(name):
        raise bad("name", "letters, digits, _ and -, starting with a letter, at most 40")
    if not isinstance(entry, dict):
        raise bad("(table)", "must be a table of fields")
    if unknown := sorted(set(entry) - KNOWN_KEYS):
        raise bad(unknown[0], f"unknown field (known: {', '.join(sorted(KNOWN_KEYS))})")
    url, family = _url(entry.get("url"), bad)
    secret = ""
    if password_env := _text(entry, "password_env", bad):
        secret = environ.get(password_env, "")
        if not secret:
            raise bad("password_env", f"the variable {password_env} is not set")
        url = url.set(password=secret)
    channels = entry.get("channels", [])
    if not isinstance(channels, list) or not all(isinstance(c, str) and c for c in channels):
        raise bad("channels", 'a list of channel ids, or ["*"]')
    return ConnectionSpec(
        name=name,
        url=url,
        family=family,
        description=_text(entry, "description", bad),
        channels=tuple(channels),
        max_rows=_number(entry, "max_rows", 100_000, bad),
        timeout_s=float(_number(entry, "timeout_s", 30, bad)),
        preview_rows=_number(entry, "preview_rows", 20, bad, lowest=0),
        max_bytes=_number(entry, "max_bytes", 256 << 20, bad),
        max_bytes_billed=_number(entry, "max_bytes_billed", None, bad),
        password_env=password_env,
        secret=secret,
    )


def _url(value: Any, bad: Any) -> tuple[URL, Family]:
    if not isinstance(value, str) or not value:
        raise bad("url", "a SQLAlchemy URL is required")
    try:
        url = make_url(value)
    except ArgumentError:
        raise bad("url", "not a SQLAlchemy URL") from None
    if url.password:
        raise bad("url", "holds a password; name its variable in password_env instead")
    known = DRIVERS.get(url.drivername)
    if known is None:
        raise bad("url", f"unknown driver {url.drivername!r} (known: {', '.join(DRIVERS)})")
    family, module = known
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise bad("url", f"driver {url.drivername!r} needs the Python package {module}")
    if family in ("sqlite", "duckdb") and not url.database:
        raise bad("url", "an embedded database needs a file path")
    return url, family


def _text(entry: dict[str, Any], key: str, bad: Any) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise bad(key, "must be a string")
    return value


def _number(entry: dict[str, Any], key: str, default: Any, bad: Any, *, lowest: int = 1) -> Any:
    value = entry.get(key, default)
    if value is default:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or value < lowest:
        raise bad(key, f"must be a number of at least {lowest}")
    return int(value) if key != "timeout_s" else value
