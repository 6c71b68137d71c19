"""Command line: `python -m bot` runs the Slack app; `python -m bot ask …` runs one session
in the terminal."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import gc
import json
import logging
import re
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.compose import build_store
from bot.errors import ConfigError
from bot.logs import configure_logging
from bot.sessions.notebook_store import notebook_text, saved_charts, thread_notebook
from bot.settings import load_settings
from bot.slack.listen.app import serve
from bot.slack.threads import ThreadRef
from bot.sql.config import load_connections
from bot.store.base import SessionRecord, Store
from bot.terminal.ask import KEY_PREFIX, ask
from bot.terminal.connections import check_connections
from bot.terminal.printable import printable
from bot.terminal.prune import prune_store
from bot.terminal.schedules import list_schedules, run_now


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m bot", description=__doc__)
    commands = root.add_subparsers(dest="command")
    commands.add_parser("slack", help="run the Slack app (the default)")
    sessions = commands.add_parser("sessions", help="list, export or prune the stored sessions")
    sessions.add_argument("action", nargs="?", choices=["list", "export", "prune"], default="list")
    sessions.add_argument("thread", nargs="?", help="for export: the session key or thread ts")
    sessions.add_argument(
        "--ipynb", action="store_true", help="export: a Jupyter notebook that reruns the analysis"
    )
    sessions.add_argument(
        "--out",
        metavar="FILE",
        help="with --ipynb: where to write it (default: <thread>.ipynb here; - for stdout)",
    )
    sessions.add_argument(
        "--charts",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="with --ipynb: where `ask --out` saved the charts the notebook shows (default: here)",
    )
    sessions.add_argument(
        "--dry-run", action="store_true", help="prune: only count what would be removed"
    )
    sessions.add_argument(
        "--vacuum", action="store_true", help="prune: then give the space back (SQLite VACUUM)"
    )
    scheduled = commands.add_parser("schedules", help="list the schedules, or fire one now")
    scheduled.add_argument("action", nargs="?", choices=["list", "run-now"], default="list")
    scheduled.add_argument("id", nargs="?", help="for run-now: the schedule's id")
    checking = commands.add_parser("connections", help="check the SQL connections")
    checking.add_argument("action", nargs="?", choices=["check"], default="check")
    asking = commands.add_parser("ask", help="analyse data from the terminal")
    asking.add_argument("question", help="what to find out")
    asking.add_argument(
        "--csv",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="a data file to upload (repeatable)",
    )
    asking.add_argument("--repo", metavar="URL", help="a public https git repository to analyse")
    asking.add_argument(
        "--session",
        metavar="NAME",
        help="continue this terminal session (history, files, sandbox), or start it",
    )
    asking.add_argument("--keep", action="store_true", help="keep the sandbox afterwards")
    asking.add_argument(
        "--connection",
        action="append",
        default=[],
        metavar="NAME",
        help="a SQL connection of CONNECTIONS_FILE the session may query (repeatable)",
    )
    asking.add_argument(
        "--out",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="where to save report.md and charts (default: here)",
    )
    asking.add_argument(
        "-i",
        "--interactive",
        action="store_true",
        help="ask follow-up questions in the same session",
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    level = logging.WARNING if args.command == "ask" else logging.INFO
    configure_logging(level, _secrets_for_logs())
    try:
        commands = {
            "ask": lambda: ask(args),
            "sessions": lambda: sessions_command(args),
            "connections": lambda: check_connections(load_settings().connections_file),
            "schedules": lambda: schedules_command(args),
        }
        return asyncio.run(commands.get(args.command, slack)())
    except KeyboardInterrupt:
        print("\nCancelled.", file=sys.stderr)
        return 130
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


def _secrets_for_logs() -> list[str]:
    try:
        settings = load_settings()
        return settings.secret_values() + load_connections(settings.connections_file).secrets()
    except ConfigError:
        return []  # reported, with its fix, where the settings are used


async def slack() -> int:
    """Run the Slack app until SIGTERM or Ctrl-C."""
    settings = load_settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    settle_heap()
    await serve(settings, stop)
    return 0


def settle_heap() -> None:
    """Move what start-up made (modules, the SDKs' types and schemas) out of the garbage
    collector's reach, for the life of the process: its oldest generation is scanned whole
    now and then, and at 200 runs at once those scans of objects that never die took 1.7 ms
    of CPU per run, 0.8 ms once frozen (`bench.concurrency` reports the collector's CPU)."""
    gc.collect()
    gc.freeze()


def prompt_line(prompt_tokens: int, window_tokens: int) -> str:
    """The latest turn's prompt against the window: "prompt 12,345 of 1,000,000 tokens (1%)"."""
    if not window_tokens:
        return f"prompt {prompt_tokens:,} tokens"
    share = 100 * prompt_tokens / window_tokens
    return f"prompt {prompt_tokens:,} of {window_tokens:,} tokens ({share:.0f}%)"


async def schedules_command(args: argparse.Namespace) -> int:
    if args.action == "run-now" and not args.id:
        raise ConfigError("schedules run-now: give the schedule's id (schedules list shows it)")
    store = build_store(load_settings())
    await store.open()
    try:
        if args.action == "run-now":
            return await run_now(store, args.id)
        return await list_schedules(store)
    finally:
        await store.close()


async def sessions_command(args: argparse.Namespace) -> int:
    return await (prune_store(args) if args.action == "prune" else list_or_export(args))


async def list_or_export(args: argparse.Namespace) -> int:
    """`sessions`: one line per session, Slack threads and terminal sessions alike;
    `sessions export THREAD`: its audit as JSONL (tool calls, feedback, runs with what
    their answers' figures were traced to, the conversation),
    or with --ipynb as a notebook."""
    store = build_store(load_settings())
    await store.open()
    try:
        records = await store.list_sessions()
        if args.action == "list":
            for r in records:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.last_activity))
                where = "terminal" if r.key.startswith(KEY_PREFIX) else "slack"
                line = (
                    f"{where:8}  {r.key}  {r.state:6}  {r.sandbox_id or '-':16}  {when}  "
                    f"${r.cost_usd:.4f}  {prompt_line(r.prompt_tokens, r.window_tokens)}"
                )
                print(printable(line))  # ids another service chose
            return 0
        wanted = {args.thread, KEY_PREFIX + str(args.thread)}
        matches = [r for r in records if wanted & {r.key, _thread_ts(r.key)}]
        if not matches:
            print(f"No session for {args.thread!r}; see `python -m bot sessions`.", file=sys.stderr)
            return 1
        key = matches[0].key
        if args.out and not args.ipynb:
            print("--out is for --ipynb; the JSONL goes to stdout.", file=sys.stderr)
            return 2
        if args.ipynb:
            return await export_notebook(store, matches[0], args.out, args.charts)
        for call in await store.tool_calls(key):
            print(json_line(dataclasses.asdict(call)))
        for rating in await store.feedback(key):
            print(json_line({"feedback": dataclasses.asdict(rating)}))
        for run in await store.runs(key):  # with what their answers' figures came from
            print(json_line({"run": dataclasses.asdict(run)}))
        # The conversation: what clearing and compaction replaced, then what the model is sent.
        for archived in await store.archived_history(key):
            print(json_line({"archived": archived}))
        print(json_line({"history": await store.load_history(key)}))
        return 0
    finally:
        await store.close()


C1_AND_DEL = re.compile("[\x7f-\x9f]")


def json_line(value: Any) -> str:
    """One JSON line, safe on a terminal: JSON escapes the C0 controls itself, and the C1
    ones (a CSI as one character) are escaped here too, the same data either way."""
    line = json.dumps(value, ensure_ascii=False)
    return C1_AND_DEL.sub(lambda m: f"\\u{ord(m[0]):04x}", line)


async def export_notebook(
    store: Store, session: SessionRecord, out: str | None, charts: Path
) -> int:
    """Write the session's notebook to `out` (default `<thread>.ipynb` here; "-": stdout),
    with the charts its steps saved that are found in `charts`."""
    saved = functools.partial(saved_charts, charts)
    text = await notebook_text(await thread_notebook(store, session.key, saved))
    if out == "-":
        print(text, end="")
        return 0
    path = Path(out or notebook_name(session))
    await asyncio.to_thread(path.write_text, text, encoding="utf-8")
    print(f"Wrote {path}", file=sys.stderr)
    return 0


def notebook_name(session: SessionRecord) -> str:
    """`<thread>.ipynb`: the thread ts, or a terminal session's name."""
    thread = _thread_ts(session.key) or session.key.removeprefix(KEY_PREFIX)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", thread) + ".ipynb"


def _thread_ts(key: str) -> str:
    """A Slack thread's ts, as people copy it from a link; "" for a terminal session."""
    ref = ThreadRef.parse(key)
    return ref.ts if ref is not None else ""
