"""Data where it lives: the SQL connections an operator declares."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class DataSettings(BaseModel):
    connections_file: Path | None = Field(
        default=None,
        description=(
            "a TOML file of SQL connections (`[connections.NAME]` with `url`, "
            "`password_env`, `description`, `channels`, `max_rows`, `timeout_s`, "
            "`preview_rows`, `max_bytes`, `max_bytes_billed`); see docs/sql.md. Unset: no "
            "connections"
        ),
    )
