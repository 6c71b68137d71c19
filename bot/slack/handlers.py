"""What the bot does with each kind of Slack input. Each handler is short and returns
quickly; the engine runs the work, and the thread's view shows it."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

from bot.agent.prompt import DataFile
from bot.datacard import for_slack
from bot.errors import BotError
from bot.sessions.engine import Engine
from bot.sessions.files import FileRejected, checked
from bot.sessions.repo import check_repo_url, check_resolves_public
from bot.sessions.run import error_ref
from bot.slack import render
from bot.slack.files import SlackFiles, data_kind
from bot.slack.policy import Policy
from bot.slack.poster import SlackPoster
from bot.slack.threads import Seen, ThreadRef
from bot.store.base import Store, StoreError

log = logging.getLogger(__name__)

MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
EXPLORE = (
    "Explore the data files in the repository at /buddy/data: what they hold, their size "
    "and quality, and the key findings. Write the report."
)
HANDLED_SUBTYPES = {None, "file_share", "thread_broadcast"}


class SlackBot:
    def __init__(
        self,
        engine: Engine,
        poster: SlackPoster,
        files: SlackFiles,
        *,
        policy: Policy = Policy(),  # noqa: B008 - frozen, safe as a default
        store: Store | None = None,
    ) -> None:
        self.engine = engine
        self.store = store
        self.policy = policy
        self.poster = poster
        self.files = files
        self.seen = Seen()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- Slack inputs --

    async def on_mention(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if not self.engine.accepting or not self.seen.first_time(
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
        if not ref.ts or not self.engine.accepting or not await self.engine.knows(ref.key):
            return  # not in a thread the bot works in
        fresh = self.seen.first_time(body.get("event_id", ""), _message_id(event))
        if fresh and not await self._refused(ref, event):
            await self._take(ref, event, text.strip())

    async def on_analyze(self, command: dict[str, Any]) -> str | None:
        """Start an analysis of a repository; returns an ephemeral error, or None."""
        refusal = self.policy.refusal(command.get("channel_id", ""), command.get("user_id", ""))
        if refusal or not self.engine.accepting:
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
        await self.engine.stop(run_id, user)

    async def on_feedback(self, block_id: str, value: str, user: str) -> None:
        """A click of an answer's feedback buttons, recorded against its run."""
        run_id = block_id.removeprefix(render.FEEDBACK_BLOCK)
        if self.store is None or not run_id or block_id == run_id:
            return
        try:
            await self.store.add_feedback(run_id, user, value, time.time())
        except StoreError as exc:
            log.warning("could not record feedback on run %s: %s", run_id, exc)

    async def on_continue(self, key: str, user: str) -> None:
        """The Continue button: a further allowance for the thread, and the run goes on."""
        await self.engine.continue_run(key, user)

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking work; running turns get `grace_s` to finish, then are interrupted
        (their threads say so). Sandboxes are kept for the next start."""
        for task in list(self._tasks):
            task.cancel()
        await self.engine.shutdown(grace_s)

    # -- the work --

    async def _refused(self, ref: ThreadRef, event: dict[str, Any]) -> bool:
        """Tell someone who may not use the bot here, privately; no session is made."""
        refusal = self.policy.refusal(ref.channel, event.get("user", ""))
        if refusal:
            thread_ts = event.get("thread_ts")
            await self.poster.ephemeral(ref.channel, event.get("user", ""), refusal, thread_ts)
        return refusal is not None

    async def _take(self, ref: ThreadRef, event: dict[str, Any], question: str) -> None:
        await self.engine.open(ref.key)
        await self._take_files(ref, event.get("files") or [])
        if question:
            await self.engine.ask(ref.key, question, user=event.get("user", ""))
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
            await self.poster.post(ref.channel, ref.ts, intake_note(name, taken))

    async def _take_file(self, ref: ThreadRef, file: dict[str, Any], name: str) -> DataFile:
        kind = data_kind(file)
        if kind is None:
            raise FileRejected(
                f"Skipped {name}: I take CSV, TSV, JSON, TXT, Excel (.xlsx), Parquet and "
                "gzip'ed CSV files."
            )
        if self.engine.file_count(ref.key) >= self.policy.max_files:
            raise FileRejected(
                f"Skipped {name}: this thread already has {self.policy.max_files} files."
            )
        if int(file.get("size") or 0) > self.policy.max_file_bytes:
            limit = self.policy.max_file_bytes >> 20
            raise FileRejected(f"Skipped {name}: it is larger than {limit} MB.")
        limit = self.policy.max_file_bytes
        opener = lambda f=file: checked(self.files.stream(f), name, kind, limit)  # noqa: E731
        return await self.engine.add_file(ref.key, str(file.get("name") or name), opener, file)

    async def _start_analysis(self, command: dict[str, Any], url: str, question: str) -> None:
        user, channel = command.get("user_id", ""), command["channel_id"]
        asked = f": {question}" if question else ""
        ts = await self.poster.post(channel, None, f"<@{user}> asked me to analyze {url}{asked}")
        ref = ThreadRef(command.get("team_id", ""), channel, ts)
        await self.engine.ask(ref.key, question or EXPLORE, user=user, repo_url=url)


def safe_display(name: str) -> str:
    """A file name as it may appear in a message: no mrkdwn, control or direction marks."""
    shown = "".join(c for c in name if c.isprintable())  # drops controls and bidi marks
    return render.escape(shown.replace("`", "'"))[:120] or "file"


def intake_note(name: str, taken: DataFile) -> str:
    """The thread's note for a file taken in: its data card, or its size when it has none."""
    if not taken.cards:
        return f":inbox_tray: Got {name} ({_size(taken.size)}) → `{taken.path}`"
    cards = "\n".join(for_slack(card) for card in taken.cards)
    first, _, rest = cards.partition("\n")
    return f":inbox_tray: {first} → `{taken.path}`" + (f"\n{rest}" if rest else "")


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
