"""`python -m bot ask`: the terminal as a front end of the engine.

Every run is stored, audited and budgeted like a Slack thread's. A terminal session is named;
`--session NAME` continues it with its history, its files (read again from their paths when
its sandbox is gone) and its sandbox if `--keep` left it alive.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import re
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bot.compose import Runtime, build_store, repo_rules
from bot.datacard import for_model
from bot.errors import BotError, ConfigError
from bot.run_events import RunFinished
from bot.sessions.engine import Engine
from bot.sessions.files import FileOpener
from bot.sessions.repo import check_repo_url
from bot.settings import Settings, load_settings
from bot.sql.config import Scope
from bot.terminal.printable import printable
from bot.terminal.render import TerminalView

CHUNK = 1 << 20
KEY_PREFIX = "terminal:"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def session_key(name: str) -> str:
    return KEY_PREFIX + name


async def ask(args: argparse.Namespace) -> int:
    missing = [str(p) for p in args.csv if not p.is_file()]
    if missing:
        raise ConfigError(f"No such file: {', '.join(missing)}")
    if args.session and not NAME.fullmatch(args.session):
        raise ConfigError("--session: use letters, digits, '.', '_' or '-' (up to 64).")
    settings = load_settings()
    repo = _checked_repo(args.repo, settings) if args.repo else None
    name = args.session or f"cli-{secrets.token_hex(4)}"
    runtime = Runtime.from_settings(settings, scope=Scope(granted=tuple(args.connection)))
    runtime.sessions.databases.connections.named(args.connection)  # unknown: said now
    store = build_store(settings)
    await store.open()
    engine = runtime.engine(store, lambda _key: TerminalView(save_to=args.out), local_file)
    key = session_key(name)
    try:
        return await _converse(engine, key, name, args, repo)
    except BotError as exc:
        print(printable(f"Error: {exc}"), file=sys.stderr)
        return 1
    finally:
        await engine.shutdown(0)  # Ctrl-C: the running command is killed
        await _close(engine, key, keep=args.keep)
        await runtime.close()
        await store.close()


def _checked_repo(url: str, settings: Settings) -> str:
    """The --repo URL, if this bot would fetch it (the addresses and ports it allows)."""
    rules = repo_rules(settings)
    return check_repo_url(url, allowed=rules.allowed, ports=rules.ports)


async def _converse(
    engine: Engine, key: str, name: str, args: argparse.Namespace, repo: str | None
) -> int:
    resumed = await engine.knows(key)
    print(f"{'Continuing' if resumed else 'New'} session {name}")
    await engine.open(key, repo)  # the sandbox boots while we read the files
    for path in args.csv:
        source = {"path": str(path.resolve())}
        taken = await engine.add_file(key, path.name, local_file(source), source)
        print(printable(f"Uploaded {path} → {taken.path} ({taken.size:,} bytes)"))
        for card in taken.cards:
            card_text = printable(for_model(card, 150))  # names and values from the file
            print("\n".join("    " + line for line in card_text.splitlines()))
    question, code, user = args.question, 0, KEY_PREFIX + getpass.getuser()
    while question:
        result = await (await engine.ask(key, question, user=user))
        code = 0 if isinstance(result, RunFinished) else 1
        question = await _follow_up() if args.interactive else ""
    print(f'Continue with: python -m bot ask --session {name} "…"')
    return code


async def _follow_up() -> str:
    try:
        return (await asyncio.to_thread(input, "\nFollow-up (empty to finish)> ")).strip()
    except EOFError:
        return ""


async def _close(engine: Engine, key: str, *, keep: bool) -> None:
    sandbox_id = engine.sandbox_id(key)
    await engine.close(key, destroy=not keep)
    if keep and sandbox_id:
        print(printable(f"Kept sandbox {sandbox_id}."))


def local_file(source: dict[str, Any]) -> FileOpener:
    """How a terminal session's file is read again: from the path it was given."""
    path = Path(source["path"])
    return lambda: read_chunks(path)


async def read_chunks(path: Path) -> AsyncIterator[bytes]:
    """A local file as an async stream of chunks, read off the event loop."""
    handle = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)
