"""Configuration: one typed object, read once from the environment and `.env`.

Its fields are declared by concern, each with its description (docs/configuration.md is
made from them: `python -m bot.settings.doc > docs/configuration.md`), and read flat, by
their environment names."""

from __future__ import annotations

from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.errors import ConfigError
from bot.settings.data import DataSettings
from bot.settings.limits import LimitSettings
from bot.settings.memory import MemorySettings
from bot.settings.model import DEFAULT_MODEL, ModelSettings
from bot.settings.sandbox import SandboxSettings
from bot.settings.schedules import ScheduleSettings
from bot.settings.slack import SlackSettings
from bot.settings.store import StoreSettings

__all__ = ["DEFAULT_MODEL", "Settings", "load_settings"]

# Settings whose value may hold a password: an error about them does not echo it.
_NOT_ECHOED = frozenset({"redis_url"})


class Settings(
    SlackSettings,
    ModelSettings,
    SandboxSettings,
    LimitSettings,
    StoreSettings,
    DataSettings,
    ScheduleSettings,
    MemorySettings,
    BaseSettings,
):
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", case_sensitive=False
    )

    @model_validator(mode="after")
    def _pick_backend(self) -> Settings:
        if self.sandbox_backend is None:
            self.sandbox_backend = "buddy" if self.buddy_token else "local"
        return self

    @model_validator(mode="after")
    def _shared_store_needs_shared_sandboxes(self) -> Settings:
        # With a shared store a session may move to another machine; a local sandbox cannot.
        if self.redis_url and self.sandbox_backend == "local":
            raise ValueError(
                "REDIS_URL is set but SANDBOX_BACKEND is local: replicas sharing a Redis need "
                "sandboxes every replica can reach. Use SANDBOX_BACKEND=buddy (with "
                "BUDDY_TOKEN, BUDDY_WORKSPACE and BUDDY_PROJECT), or unset REDIS_URL."
            )
        return self

    @model_validator(mode="after")
    def _snapshots_need_buddy(self) -> Settings:
        if self.session_idle_action == "snapshot" and self.sandbox_backend != "buddy":
            raise ValueError(
                "SESSION_IDLE_ACTION=snapshot needs Buddy sandboxes (local ones have no "
                "snapshots): set BUDDY_TOKEN, or use delete or stop."
            )
        return self

    @staticmethod
    def id_list(value: str) -> frozenset[str]:
        return frozenset(part.strip() for part in value.split(",") if part.strip())

    @property
    def warm_imports(self) -> tuple[str, ...]:
        """KERNEL_WARM_IMPORTS as a list, in its order."""
        return tuple(name.strip() for name in self.kernel_warm_imports.split(",") if name.strip())

    @property
    def backend(self) -> Literal["buddy", "local"]:
        assert self.sandbox_backend is not None
        return self.sandbox_backend

    def secret_values(self) -> list[str]:
        """Every configured secret, for scrubbing output before it leaves the process."""
        secrets = (self.slack_bot_token, self.slack_app_token, self.anthropic_api_key)
        values = [s.get_secret_value() for s in (*secrets, self.buddy_token) if s]
        return values + _url_passwords(self.redis_url)


def load_settings(**overrides: object) -> Settings:
    """Read the settings once; a bad value becomes one ConfigError line naming the variable."""
    try:
        # overrides are checked by pydantic as the environment is: a bad one is a ConfigError
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    first = exc.errors()[0]
    if not first["loc"]:  # a rule across settings: its message names them and the fix
        return f"Configuration error: {first.get('ctx', {}).get('error', first['msg'])}"
    name = str(first["loc"][0]).upper()
    value = first.get("input")
    hidden = isinstance(value, dict) or first["loc"][0] in _NOT_ECHOED
    shown = "" if hidden else f" (got {str(value)[:40]!r})"
    return (
        f"Configuration error: {name}: {first['msg']}{shown}. "
        f"Set {name} in the environment or in .env."
    )


def _url_passwords(url: str | None) -> list[str]:
    """A URL's password, as written and decoded (in the address, or a `password=` query)."""
    if not url:
        return []
    parts = urlsplit(url)
    password = parts.password or parse_qs(parts.query).get("password", [""])[0]
    return sorted({password, unquote(password)} - {""})
