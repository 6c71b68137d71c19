"""Command line: `python -m bot` runs the Slack app; `python -m bot ask …` runs one session
in the terminal."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import secrets
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from bot.agent.events import RunFinished
from bot.errors import BotError, ConfigError
from bot.runtime import Runtime
from bot.scrub import Scrubber, ScrubbingFilter
from bot.sessions.repo import check_repo_url
from bot.sessions.session import Session
from bot.settings import load_settings
from bot.slack.app import serve
from bot.store.sqlite import SqliteStore
from bot.terminal import TerminalReporter

CHUNK = 1 << 20


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m bot", description=__doc__)
    commands = root.add_subparsers(dest="command")
    commands.add_parser("slack", help="run the Slack app (the default)")
    sessions = commands.add_parser("sessions", help="list the stored sessions")
    sessions.add_argument("action", nargs="?", choices=["list", "export"], default="list")
    sessions.add_argument("thread", nargs="?", help="for export: the session key or thread ts")
    ask = commands.add_parser("ask", help="analyse data from the terminal")
    ask.add_argument("question", help="what to find out")
    ask.add_argument(
        "--csv",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a data file to upload (repeatable)",
    )
    ask.add_argument("--repo", metavar="URL", help="a public https git repository to analyse")
    ask.add_argument("--keep", action="store_true", help="keep the sandbox afterwards")
    ask.add_argument(
        "--out",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="where to save report.md and charts (default: here)",
    )
    ask.add_argument(
        "-i",
        "--interactive",
        action="store_true",
        help="ask follow-up questions in the same session",
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.command == "ask" else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    scrubbing = ScrubbingFilter(Scrubber(_secrets_for_logs()))
    for handler in logging.getLogger().handlers:
        handler.addFilter(scrubbing)
    try:
        commands = {"ask": lambda: ask(args), "sessions": lambda: list_or_export(args)}
        return asyncio.run(commands.get(args.command, slack)())
    except KeyboardInterrupt:
        print("\nCancelled.", file=sys.stderr)
        return 130
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


def _secrets_for_logs() -> list[str]:
    try:
        return load_settings().secret_values()
    except ConfigError:
        return []  # reported, with its fix, where the settings are used


async def slack() -> int:
    """Run the Slack app until SIGTERM or Ctrl-C."""
    settings = load_settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await serve(settings, stop)
    return 0


async def list_or_export(args: argparse.Namespace) -> int:
    """`sessions`: one line per session; `sessions export THREAD`: its audit as JSONL."""
    store = SqliteStore(load_settings().store_path)
    await store.open()
    try:
        records = await store.list_sessions()
        if args.action == "list":
            for r in records:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.last_activity))
                print(f"{r.key}  {r.state:6}  {r.sandbox_id or '-':16}  {when}  ${r.cost_usd:.4f}")
            return 0
        matches = [r for r in records if args.thread in (r.key, r.thread_ts)]
        if not matches:
            print(f"No session for {args.thread!r}; see `python -m bot sessions`.", file=sys.stderr)
            return 1
        for call in await store.tool_calls(matches[0].key):
            print(json.dumps(dataclasses.asdict(call), ensure_ascii=False))
        return 0
    finally:
        await store.close()


async def ask(args: argparse.Namespace) -> int:
    missing = [str(p) for p in args.csv if not p.is_file()]
    if missing:
        raise ConfigError(f"No such file: {', '.join(missing)}")
    repo = check_repo_url(args.repo) if args.repo else None
    runtime = Runtime.from_settings(load_settings())
    session = runtime.new_session(f"cli-{secrets.token_hex(4)}", repo_url=repo)
    session.start()  # the sandbox boots while we read the files
    try:
        return await _converse(session, args)
    except BotError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    finally:
        await _close(session, runtime, keep=args.keep)


async def _converse(session: Session, args: argparse.Namespace) -> int:
    for path in args.csv:
        taken = (await session.add_file(path.name, lambda path=path: read_chunks(path))).file
        print(f"Uploaded {path} → {taken.path} ({taken.size:,} bytes)")
    question, code = args.question, 0
    while question:
        result = await session.ask(question, TerminalReporter())
        code = 0 if isinstance(result, RunFinished) else 1
        saved = await session.save_outputs(args.out)
        for path in saved:
            print(f"Saved {path}")
        if not any(path.name == "report.md" for path in saved):
            print("No report.md was written in this run.")
        question = await _follow_up() if args.interactive else ""
    return code


async def _follow_up() -> str:
    try:
        return (await asyncio.to_thread(input, "\nFollow-up (empty to finish)> ")).strip()
    except EOFError:
        return ""


async def _close(session: Session, runtime: Runtime, *, keep: bool) -> None:
    if keep and (sandbox := await session.sandbox_if_ready()):
        print(f"Kept sandbox {sandbox.id}.")
    await session.close(destroy=not keep)
    await runtime.close()


async def read_chunks(path: Path) -> AsyncIterator[bytes]:
    """A local file as an async stream of chunks, read off the event loop."""
    handle = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        await asyncio.to_thread(handle.close)
