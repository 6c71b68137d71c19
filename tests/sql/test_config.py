"""The connections file: a bad file, an unknown driver or a missing variable is one line
naming the connection and the field; channels decide who may use a connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.sql.config import Connections, Scope, load_connections

GOOD = """
[connections.warehouse]
url = "postgresql://analyst@127.0.0.1:5432/shop"
password_env = "WAREHOUSE_PASSWORD"
description = "Orders and customers since 2019"
channels = ["C0123ABC"]
max_rows = 100000
timeout_s = 30

[connections.everywhere]
url = "sqlite:////srv/data/pop.sqlite"
channels = ["*"]

[connections.private]
url = "duckdb:////srv/data/pop.duckdb"
channels = ["D0DM", "G0PRIV"]
"""
SECRET = "s3cret-password-value"


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Connections:
    path = tmp_path / "connections.toml"
    path.write_text(text)
    return load_connections(path, {"WAREHOUSE_PASSWORD": SECRET} if env is None else env)


def test_a_good_file_is_read_whole(tmp_path: Path) -> None:
    connections = load(tmp_path, GOOD)
    warehouse = connections.specs["warehouse"]
    assert warehouse.family == "postgresql" and warehouse.dialect == "postgres"
    assert warehouse.max_rows == 100_000 and warehouse.timeout_s == 30
    assert warehouse.url.password == SECRET
    assert SECRET not in warehouse.shown_url and SECRET not in repr(warehouse)
    assert SECRET not in str(warehouse.url)
    assert connections.secrets() == [SECRET]


def test_channels_decide_who_may_use_a_connection(tmp_path: Path) -> None:
    connections = load(tmp_path, GOOD)
    assert connections.allowed_in("C0123ABC") == ("warehouse", "everywhere")
    assert connections.allowed_in("C0OTHER") == ("everywhere",)
    assert connections.allowed_in("G0PRIV") == ("everywhere", "private")
    # "*" covers channels, not direct messages: a DM must be listed by its id.
    assert connections.allowed_in("D0OTHER") == ()
    assert connections.allowed_in("D0DM") == ("private",)


def test_a_scope_reads_the_channel_or_the_terminal_grant(tmp_path: Path) -> None:
    connections = load(tmp_path, GOOD)
    slack = Scope(place_of=lambda key: key.split(":")[1] if key.count(":") == 2 else None)
    assert slack.allowed(connections, "T1:C0123ABC:1.0") == ("warehouse", "everywhere")
    assert slack.allowed(connections, "terminal:x") == ()
    terminal = Scope(granted=("private",))
    assert terminal.allowed(connections, "terminal:x") == ("private",)
    with pytest.raises(ConfigError, match="unknown connection 'nope'"):
        Scope(granted=("nope",)).allowed(connections, "terminal:x")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[connections.w]\nurl = 'oracle://x/y'\nchannels=['*']", "'w', field url: unknown driver"),
        ("[connections.w]\nchannels=['*']", "'w', field url: a SQLAlchemy URL is required"),
        ("[connections.w]\nurl = 'not a url'", "'w', field url: not a SQLAlchemy URL"),
        (
            "[connections.w]\nurl = 'postgresql://a:pw@h/db'",
            "'w', field url: holds a password",
        ),
        (
            "[connections.w]\nurl = 'postgresql://a@h/db'\npassword_env = 'NOT_SET_HERE'",
            "'w', field password_env: the variable NOT_SET_HERE is not set",
        ),
        ("[connections.w]\nurl = 'sqlite://'", "'w', field url: an embedded database"),
        ("[connections.w]\nurl = 'sqlite:///x.db'\nmax_rows = 0", "'w', field max_rows"),
        ("[connections.w]\nurl = 'sqlite:///x.db'\ntimeout_s = 'x'", "'w', field timeout_s"),
        ("[connections.w]\nurl = 'sqlite:///x.db'\nchannels = 'C1'", "'w', field channels"),
        ("[connections.w]\nurl = 'sqlite:///x.db'\npasword_env = 'X'", "field pasword_env"),
        ("[connections.'bad name']\nurl = 'sqlite:///x.db'", "'bad name', field name"),
        (
            "[connections.w]\nurl = 'mysql+pymysql://a@h/db'",
            "needs the Python package pymysql",
        ),
        ("[connections.w\nurl = 1", "not valid TOML"),
        ("[other]\nx = 1", "only [connections.NAME] tables"),
    ],
)
def test_a_bad_entry_is_one_line_naming_connection_and_field(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text, env={})
    message = str(caught.value)
    assert said in message and "\n" not in message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"CONNECTIONS_FILE .*nope\.toml"):
        load_connections(tmp_path / "nope.toml", {})


def test_no_file_means_no_connections() -> None:
    assert load_connections(None).specs == {}
