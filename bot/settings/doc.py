"""docs/configuration.md, made from the settings themselves so that it cannot drift:
`python -m bot.settings.doc > docs/configuration.md` (a test checks the file is current)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bot.settings.data import DataSettings
from bot.settings.limits import LimitSettings
from bot.settings.memory import MemorySettings
from bot.settings.model import ModelSettings
from bot.settings.sandbox import SandboxSettings
from bot.settings.schedules import ScheduleSettings
from bot.settings.slack import SlackSettings
from bot.settings.store import StoreSettings

GROUPS: list[tuple[str, type[BaseModel]]] = [
    ("Slack", SlackSettings),
    ("The model", ModelSettings),
    ("Sandboxes", SandboxSettings),
    ("Limits", LimitSettings),
    ("Store, replicas and monitoring", StoreSettings),
    ("SQL connections", DataSettings),
    ("Scheduled analyses", ScheduleSettings),
    ("Channel memory", MemorySettings),
]
HEADER = """# Configuration

<!-- Made by `python -m bot.settings.doc > docs/configuration.md`; edit the settings'
descriptions in `bot/settings/`, not this file. -->

Every setting is read once at start, from the environment or from a `.env` file in the
working directory. A missing or malformed value stops the bot with one line that names the
variable and how to fix it. Names are case-insensitive. The first page of settings a new
user needs is in the [README](../README.md#settings).
"""


def markdown() -> str:
    parts = [HEADER]
    for title, group in GROUPS:
        about = (sys.modules[group.__module__].__doc__ or "").strip()
        parts.append(f"\n## {title}\n\n{about}\n")
        parts.append("\n| variable | meaning | default |\n|---|---|---|\n")
        parts.extend(
            f"| {names} | {meaning} | {default} |\n" for names, meaning, default in rows(group)
        )
    return "".join(parts)


def rows(group: type[BaseModel]) -> list[tuple[str, str, str]]:
    """One row per setting; settings that share a description (and sit together) share a
    row, their defaults in order."""
    merged: list[tuple[list[str], str, list[str]]] = []
    for name, field in group.model_fields.items():
        meaning = field.description or ""
        if merged and merged[-1][1] == meaning:
            merged[-1][0].append(name)
            merged[-1][2].append(shown(field))
        else:
            merged.append(([name], meaning, [shown(field)]))
    return [
        (", ".join(f"`{n.upper()}`" for n in names), meaning, ", ".join(defaults))
        for names, meaning, defaults in merged
    ]


def shown(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("shown"), str):
        return str(extra["shown"])
    return _value(field.default)


def _value(value: Any) -> str:
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value >= 1 << 20 and value % (1 << 20) == 0:
        return f"{_size(value)} ({value})"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return f"`{value}`" if value else "empty"
    if isinstance(value, Path):
        return f"`{value}`"
    return str(value)


def _size(value: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if value % (1 << shift) == 0:
            return f"{value >> shift} {unit}"
    return str(value)


if __name__ == "__main__":
    sys.stdout.write(markdown())
