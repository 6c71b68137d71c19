"""What the bot does with each kind of Slack input. Each handler is short and returns
quickly; the work itself runs per thread in the session manager."""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from bot.agent.events import Event, Reporter, RunFinished
from bot.agent.prompt import DataFile
from bot.errors import BotError
from bot.runtime import Runtime
from bot.sessions.files import FileRejected, checked
from bot.sessions.manager import SessionManager
from bot.sessions.repo import check_repo_url, check_resolves_public
from bot.sessions.session import Session
from bot.slack import render
from bot.slack.files import SlackFiles, data_kind
from bot.slack.policy import Policy
from bot.slack.poster import SlackPoster
from bot.slack.progress import SlackProgress
from bot.store.base import RunRecord, Store

log = logging.getLogger(__name__)

MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
EXPLORE = (
    "Explore the data files in the repository at /buddy/data: what they hold, their size "
    "and quality, and the key findings. Write the report."
)
HANDLED_SUBTYPES = {None, "file_share", "thread_broadcast"}
OUTPUT_MAX_BYTES = 50 << 20
SHUTDOWN_NOTE = (
    "The bot is restarting, so this run was interrupted. Reply here (for example "
    '"continue") in a minute to pick it up; the conversation and files are kept.'
)
INTERRUPTED_NOTE = (
    ":warning: The bot restarted while working on this thread, so that work was "
    'interrupted. Reply here (for example "continue") to pick it up; the conversation '
    "and files are kept."
)


@dataclass(frozen=True)
class ThreadRef:
    team: str
    channel: str
    ts: str

    @property
    def key(self) -> str:
        return f"{self.team}:{self.channel}:{self.ts}"

    @classmethod
    def from_key(cls, key: str) -> ThreadRef:
        team, channel, ts = key.split(":", 2)
        return cls(team, channel, ts)


class Seen:
    """A bounded memory of event and message ids, so redeliveries are answered once."""

    def __init__(self, size: int = 10_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._size = size

    def first_time(self, *ids: str) -> bool:
        if any(i in self._ids for i in ids if i):
            return False
        for i in filter(None, ids):
            self._ids[i] = None
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)
        return True


def error_ref(exc: BaseException, what: str) -> str:
    """Log the details under a short id that the user's message quotes."""
    ref = secrets.token_hex(3)
    log.error("%s [ref %s]", what, ref, exc_info=exc)
    return ref


class SlackBot:
    def __init__(
        self,
        runtime: Runtime,
        store: Store,
        poster: SlackPoster,
        files: SlackFiles,
        *,
        idle_timeout_s: float,
        policy: Policy = Policy(),  # noqa: B008 - frozen, safe as a default
    ) -> None:
        self.policy = policy
        self.manager = SessionManager(
            runtime,
            store,
            idle_timeout_s=idle_timeout_s,
            on_idle=self.on_idle,
            opener_for=lambda source: lambda: files.stream(source),
        )
        self.poster = poster
        self.files = files
        self.seen = Seen()
        self._runs: dict[str, str] = {}  # run id -> thread key, for the Stop button
        self._stopped_by: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._extra: dict[str, float] = {}  # Continue pressed: allowance for the next run
        self._granted: dict[str, float] = {}  # allowances added to a thread's budget so far
        self.shutting_down = False

    # -- Slack inputs --

    async def on_mention(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if self.shutting_down or not self.seen.first_time(
            body.get("event_id", ""), _message_id(event)
        ):
            return
        ref = ThreadRef(_team(event, body), event["channel"], event.get("thread_ts") or event["ts"])
        if await self._refused(ref, event):
            return
        await self.poster.react(ref.channel, event["ts"], "eyes")
        await self._take(ref, event, MENTION.sub("", event.get("text") or "").strip())

    async def on_message(
        self, event: dict[str, Any], body: dict[str, Any], bot_user_id: str | None
    ) -> None:
        if event.get("subtype") not in HANDLED_SUBTYPES or event.get("bot_id"):
            return  # edits, deletions, bots (ourselves included)
        text = event.get("text") or ""
        if bot_user_id and f"<@{bot_user_id}>" in text:
            return  # a mention: the app_mention event handles it
        if event.get("channel_type") == "im" and not event.get("thread_ts"):
            await self.on_mention(event, body)  # a direct message starts its own thread
            return
        ref = ThreadRef(_team(event, body), event["channel"], event.get("thread_ts") or "")
        if not ref.ts or not self.manager.knows(ref.key) or self.shutting_down:
            return  # not in a thread the bot works in
        fresh = self.seen.first_time(body.get("event_id", ""), _message_id(event))
        if fresh and not await self._refused(ref, event):
            await self._take(ref, event, text.strip())

    async def on_analyze(self, command: dict[str, Any]) -> str | None:
        """Start an analysis of a repository; returns an ephemeral error, or None."""
        refusal = self.policy.refusal(command.get("channel_id", ""), command.get("user_id", ""))
        if refusal or self.shutting_down:
            return refusal or "I'm restarting; try again in a minute."
        url, _, question = (command.get("text") or "").strip().partition(" ")
        if not url:
            return "Usage: `/analyze <https repository URL> [question]`"
        try:
            url = check_repo_url(url, self.policy.repo_hosts)
            await check_resolves_public(url)
        except BotError as exc:
            return f":warning: {exc}"
        task = asyncio.create_task(self._start_analysis(command, url, question.strip()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    async def on_stop(self, run_id: str, user: str) -> None:
        key = self._runs.get(run_id)
        if key is not None and self.manager.stop(key):
            self._stopped_by[run_id] = user

    async def on_idle(self, session: Session) -> None:
        ref = ThreadRef.from_key(session.key)
        await self.poster.post(
            ref.channel,
            ref.ts,
            ":zzz: This thread was quiet, so its sandbox was shut down. Write here again to "
            "pick up where we left off: the files will be loaded again.",
        )

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking work; running turns get `grace_s` to finish, then are interrupted
        (their threads say so). Sandboxes are kept for the next start."""
        self.shutting_down = True
        for task in list(self._tasks):
            task.cancel()
        await self.manager.shutdown(grace_s)

    async def tell_interrupted(self, runs: list[RunRecord]) -> None:
        """After a crash: the threads whose work was cut off are told how to go on."""
        for run in runs:
            ref = ThreadRef.from_key(run.key)
            try:
                await self.poster.post(ref.channel, ref.ts, INTERRUPTED_NOTE)
            except Exception as exc:
                error_ref(exc, f"telling {run.key} about an interrupted run")

    # -- the work --

    async def _refused(self, ref: ThreadRef, event: dict[str, Any]) -> bool:
        """Tell someone who may not use the bot here, privately; no session is made."""
        refusal = self.policy.refusal(ref.channel, event.get("user", ""))
        if refusal:
            thread_ts = event.get("thread_ts")
            await self.poster.ephemeral(ref.channel, event.get("user", ""), refusal, thread_ts)
        return refusal is not None

    async def _take(self, ref: ThreadRef, event: dict[str, Any], question: str) -> None:
        await self.manager.open(ref.key)
        await self._take_files(ref, event.get("files") or [])
        if question:
            user = event.get("user", "")
            run = lambda s, q, a: self._run(ref, s, q, a, user)  # noqa: E731
            self.manager.submit(ref.key, question, run, user)
        elif not event.get("files"):
            await self.poster.post(ref.channel, ref.ts, "What would you like me to find out?")

    async def _take_files(self, ref: ThreadRef, files: list[dict]) -> None:
        for file in files:
            name = safe_display(file.get("name") or file.get("id", "file"))
            try:
                taken = await self._take_file(ref, file, name)
            except BotError as exc:
                await self.poster.post(ref.channel, ref.ts, f":no_entry_sign: {exc}")
                continue
            except Exception as exc:
                ref_id = error_ref(exc, f"taking in {name}")
                await self.poster.post(
                    ref.channel, ref.ts, f":warning: Could not read {name} (ref {ref_id})."
                )
                continue
            await self.poster.post(
                ref.channel, ref.ts,
                f":inbox_tray: Got {name} ({_size(taken.size)}) → `{taken.path}`",
            )  # fmt: skip

    async def _take_file(self, ref: ThreadRef, file: dict[str, Any], name: str) -> DataFile:
        kind = data_kind(file)
        if kind is None:
            raise FileRejected(f"Skipped {name}: I take CSV, TSV, JSON and TXT files.")
        session = self.manager.get(ref.key)
        if session is not None and len(session.intakes) >= self.policy.max_files:
            raise FileRejected(
                f"Skipped {name}: this thread already has {self.policy.max_files} files."
            )
        if int(file.get("size") or 0) > self.policy.max_file_bytes:
            limit = self.policy.max_file_bytes >> 20
            raise FileRejected(f"Skipped {name}: it is larger than {limit} MB.")
        limit = self.policy.max_file_bytes
        opener = lambda f=file: checked(self.files.stream(f), name, kind, limit)  # noqa: E731
        return await self.manager.add_file(ref.key, str(file.get("name") or name), opener, file)

    async def _start_analysis(self, command: dict[str, Any], url: str, question: str) -> None:
        user, channel = command.get("user_id", ""), command["channel_id"]
        asked = f": {question}" if question else ""
        ts = await self.poster.post(channel, None, f"<@{user}> asked me to analyze {url}{asked}")
        ref = ThreadRef(command.get("team_id", ""), channel, ts)
        await self.manager.open(ref.key, repo_url=url)
        run = lambda s, q, a: self._run(ref, s, q, a, user)  # noqa: E731
        self.manager.submit(ref.key, question or EXPLORE, run, user)

    async def on_continue(self, key: str, user: str) -> None:
        """The Continue button: a further allowance for the thread, and the run goes on."""
        if not self.manager.knows(key) or self.shutting_down:
            return
        self._extra[key] = self._extra.get(key, 0.0) + self.policy.run_budget_usd
        ref = ThreadRef.from_key(key)
        await self.manager.open(key)
        run = lambda s, q, a: self._run(ref, s, q, a, user)  # noqa: E731
        self.manager.submit(key, "Continue where you stopped.", run, user)

    async def _budget(self, ref: ThreadRef, user: str) -> float | None:
        """This run's allowance in USD, or None (and a note in the thread) if none is left."""
        p = self.policy
        day_start = time.time() - time.time() % 86400
        thread_spent, user_spent = await self.manager.spent(ref.key, user, day_start)
        extra = self._extra.pop(ref.key, 0.0)
        self._granted[ref.key] = self._granted.get(ref.key, 0.0) + extra
        thread_left = p.thread_budget_usd + self._granted[ref.key] - thread_spent
        user_left = p.user_day_budget_usd - user_spent
        if user_left <= 0:
            await self.poster.post(
                ref.channel, ref.ts,
                f":moneybag: You have used ${user_spent:.2f} of your "
                f"${p.user_day_budget_usd:.2f} for today; try again tomorrow.",
            )  # fmt: skip
            return None
        if thread_left <= 0:
            note = (
                f":moneybag: This thread has used ${thread_spent:.2f} of its "
                f"${p.thread_budget_usd + self._granted[ref.key]:.2f} budget."
            )
            blocks = render.continue_button(note, ref.key, p.run_budget_usd)
            await self.poster.post(ref.channel, ref.ts, note, blocks)
            return None
        return min(p.run_budget_usd, thread_left, user_left)

    async def _run(
        self, ref: ThreadRef, session: Session, question: str, audit: Reporter, user: str
    ) -> None:
        budget = await self._budget(ref, user)
        if budget is None:
            return
        run_id = secrets.token_hex(6)
        self._runs[run_id] = ref.key
        progress = SlackProgress(self.poster, ref.channel, ref.ts, run_id)

        async def report(event: Event) -> None:
            await audit(event)
            await progress(event)

        try:
            await progress.begin()
            result = await _ask_watching_sandbox(session, question, report, budget)
            if isinstance(result, RunFinished):
                await self._share_outputs(ref, session)
            if isinstance(result, RunFinished) and result.stop == "budget":
                note = f"I stopped at this run's budget of ${budget:.2f}."
                blocks = render.continue_button(note, ref.key, self.policy.run_budget_usd)
                await self.poster.post(ref.channel, ref.ts, note, blocks)
        except asyncio.CancelledError:
            if self.shutting_down:
                await progress.failed(SHUTDOWN_NOTE)
            else:
                await progress.stopped(self._stopped_by.pop(run_id, None))
            raise
        except BotError as exc:
            await progress.failed(f"{exc} (ref {error_ref(exc, 'run failed')})")
        except Exception as exc:
            ref_id = error_ref(exc, "run crashed")
            await progress.failed(f"Something went wrong on my side (ref {ref_id}).")
        finally:
            self._runs.pop(run_id, None)

    async def _share_outputs(self, ref: ThreadRef, session: Session) -> None:
        uploads = []
        async for name, chunks in session.outputs():
            data = bytearray()
            async for chunk in chunks:
                data += chunk
                if len(data) > OUTPUT_MAX_BYTES:
                    break
            if len(data) <= OUTPUT_MAX_BYTES:
                uploads.append({"content": bytes(data), "filename": name, "title": name})
        if not any(u["filename"] == "report.md" for u in uploads):
            await self.poster.post(ref.channel, ref.ts, "_No report.md was written this time._")
        if uploads:
            await self.poster.upload(ref.channel, ref.ts, uploads)


async def _ask_watching_sandbox(
    session: Session, question: str, reporter: Reporter, budget_usd: float
) -> Any:
    """Run the question while the sandbox boots; if the sandbox fails, say that instead."""
    ask = asyncio.create_task(session.ask(question, reporter, budget_usd))
    ready = asyncio.create_task(session.sandbox())
    try:
        await asyncio.wait([ask, ready], return_when=asyncio.FIRST_COMPLETED)
        if ready.done() and not ready.cancelled() and ready.exception() and not ask.done():
            ask.cancel()
            await asyncio.wait([ask])
            raise ready.exception()  # type: ignore[misc]
        return await ask
    finally:
        for task in (ask, ready):
            task.cancel()
        if ready.done() and not ready.cancelled():
            ready.exception()  # seen here; the run reports it, or the tools did


def safe_display(name: str) -> str:
    """A file name as it may appear in a message: no mrkdwn, control or direction marks."""
    shown = "".join(c for c in name if c.isprintable())  # drops controls and bidi marks
    return render.escape(shown.replace("`", "'"))[:120] or "file"


def _team(event: dict[str, Any], body: dict[str, Any]) -> str:
    return str(event.get("team") or body.get("team_id") or "")


def _message_id(event: dict[str, Any]) -> str:
    return f"{event.get('channel')}/{event.get('ts')}"


def _size(size: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")
