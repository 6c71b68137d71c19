"""The command that runs a snippet in a local container, and the snippet file it reads."""

from __future__ import annotations

from collections.abc import Mapping

from bot.sandbox.base import (
    INTERPRETERS,
    NOT_FOUND_EXIT,
    RUN_DIR,
    not_installed,
    unsupported_language,
)
from bot.sandbox.local.isolation import resolve_interpreter

# Pinned over the PATH lookup: not the bot's python (maybe in /usr/local): Debian's.
HOST_PROGRAMS = {"python": "/usr/bin/python3", "bash": "/bin/bash"}
SNIPPET_STEM = "main"  # the snippet file is /buddy/.run/main.<extension>


class Programs:
    """Language -> interpreter on the host (which the container sees under /usr)."""

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self._programs = {lang: i.program for lang, i in INTERPRETERS.items()}
        self._programs.update(HOST_PROGRAMS)
        self._programs.update(overrides or {})

    def interpreter(self, language: str) -> str | None:
        """The interpreter's path, if the sandbox can run it."""
        return resolve_interpreter(self._programs[language])

    def command(self, language: str, code: str) -> tuple[list[str], dict[str, bytes]]:
        """The command to run a snippet, and the files to place in the sandbox for it."""
        if (problem := unsupported_language(language)) is not None:
            return _fail_command(problem), {}
        interpreter = self.interpreter(language)
        if interpreter is None:
            return _fail_command(not_installed(language)), {}
        snippet = f"{RUN_DIR}/{SNIPPET_STEM}.{INTERPRETERS[language].extension}"
        return [interpreter, snippet], {snippet: code.encode("utf-8", errors="replace")}


def _fail_command(message: str) -> list[str]:
    """A command that reports `message` like a shell would for a missing program."""
    script = f'printf "%s\\n" "$1" >&2; exit {NOT_FOUND_EXIT}'
    return ["/bin/sh", "-c", script, "sh", message]
