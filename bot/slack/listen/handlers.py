"""The Slack listeners: what the bot does with each kind of Slack input. Each is short and
returns quickly; the engine runs the work, and the run's view (run_view.py) shows it.
Routing between replicas (routing.py), the intake of files (intake.py, policy.py) and DM
threads' titles and prompts (dm_threads.py) are their own modules. Slack's agent sessions
(agent_sessions.py) get `processing` as the first sign of a question, and their native stop
button comes here as `agent_session_stopped`, handled as the Stop button is. The Show work
and Notebook buttons under an answer are work_buttons.py's (`work`)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Protocol

from bot.coord import Coordinator, LocalCoordinator
from bot.sessions.engine import Engine
from bot.slack.listen.analyses import Analyses
from bot.slack.listen.channel_memory import ChannelMemory
from bot.slack.listen.dm_threads import DmThreads
from bot.slack.listen.files import SlackFiles
from bot.slack.listen.incoming_files import FileIntake
from bot.slack.listen.memory_list import MemoryList
from bot.slack.listen.policy import Policy
from bot.slack.listen.routing import Router
from bot.slack.listen.schedule_buttons import ScheduleButtons
from bot.slack.listen.schedule_list import ScheduleList
from bot.slack.listen.work_buttons import WorkButtons
from bot.slack.render import block_kit, wording
from bot.slack.render.file_notes import safe_display
from bot.slack.threads import Click, ThreadRef
from bot.slack.view.agent_sessions import PROCESSING, AgentSessions
from bot.slack.view.assistant_threads import AssistantThreads
from bot.slack.web import SlackWeb
from bot.store.base import Store, StoreError

log = logging.getLogger(__name__)

MENTION = re.compile(r"<@[A-Z0-9]+>\s*")
LEADING_MENTION = re.compile(r"^\s*<@[A-Z0-9]+>\s*")
HANDLED_SUBTYPES = {None, "file_share", "thread_broadcast"}


class RoutedFirings(Protocol):
    async def routed(self, message: dict[str, Any]) -> None: ...


class SlackListeners:
    def __init__(
        self,
        engine: Engine,
        web: SlackWeb,
        files: SlackFiles,
        *,
        policy: Policy = Policy(),  # noqa: B008 - frozen, safe as a default
        store: Store | None = None,
        assistant: AssistantThreads | None = None,
        coord: Coordinator | None = None,
        sessions: AgentSessions | None = None,
        memory: ChannelMemory | None = None,
    ) -> None:
        self.engine = engine
        self.memory = memory  # "remember for this channel: …"
        self.sessions = sessions  # Slack's agent sessions, where the workspace has them
        self.store = store
        self.assistant = assistant  # Slack's assistant style; None: classic
        self.policy = policy
        self.web = web
        self.files = files
        self.coord = coord or LocalCoordinator()
        self.router = Router(self.coord, engine.adopt)
        self.intake = FileIntake(engine, files, policy)
        self.dms = DmThreads(web)
        self.analyses = Analyses(engine, web, policy)
        # Show work and Notebook, from the store (and the thread's charts, for the notebook)
        self.work = WorkButtons(web, store, policy, files)
        self.schedule_buttons = ScheduleButtons(web, store, policy)  # Confirm and Cancel
        self.schedule_list = ScheduleList(web, store, policy)  # /analyze schedules
        self.memory_list = MemoryList(web, store, policy)  # /analyze memory
        self.scheduled: RoutedFirings | None = None  # firings other replicas pass on
        # Questions being taken in (their files fetched) before they are asked: (key, message
        # ts) -> (who asked, who stopped it before its run started: "" for nobody yet)
        self._arriving: dict[tuple[str, str], tuple[str, str]] = {}

    # -- Slack inputs --

    async def on_mention(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        if not self.engine.accepting or not await self.coord.first_time(
            body.get("event_id", ""), _message_id(event)
        ):
            return
        ref = ThreadRef(_team(event, body), event["channel"], event.get("thread_ts") or event["ts"])
        if await self.router.here(ref.key, {"kind": "mention", "event": event, "body": body}):
            await self._mention(ref, event)

    async def _mention(self, ref: ThreadRef, event: dict[str, Any]) -> None:
        if await self._refused(ref, event):
            return
        text = MENTION.sub("", event.get("text") or "").strip()
        if not await self._remembered(ref, event, text):
            await self._take(ref, event, text)

    async def _remembered(self, ref: ThreadRef, event: dict[str, Any], text: str) -> bool:
        """A note or a definition to save for the channel, not a question (True: saved)."""
        if self.memory is None:
            return False
        user = event.get("user", "")
        return await self.memory.remember(ref, user, text) or await self.memory.define(
            ref, user, text
        )

    async def on_message(
        self, event: dict[str, Any], body: dict[str, Any], bot_user_id: str | None
    ) -> None:
        if event.get("subtype") not in HANDLED_SUBTYPES or event.get("bot_id"):
            return  # edits, deletions, bots (ourselves included)
        text = event.get("text") or ""
        # Slack sends no app_mention in DMs: there a mention is a message like any other
        in_dm = event.get("channel_type") == "im"
        if in_dm and not event.get("thread_ts"):
            await self.on_mention(event, body)  # a direct message starts its own thread
            return
        if bot_user_id and f"<@{bot_user_id}>" in text and not in_dm:
            return  # a mention: the app_mention event handles it
        ref = ThreadRef(_team(event, body), event["channel"], event.get("thread_ts") or "")
        if not ref.ts or not self.engine.accepting or not await self.engine.knows(ref.key):
            return  # not in a thread the bot works in
        if not await self.coord.first_time(body.get("event_id", ""), _message_id(event)):
            return
        if await self.router.here(ref.key, {"kind": "message", "event": event, "body": body}):
            await self._follow_up(ref, event)

    async def _follow_up(self, ref: ThreadRef, event: dict[str, Any]) -> None:
        if await self._refused(ref, event):
            return
        # a follow-up may open with a mention (in a DM, say): the request is what follows
        text = LEADING_MENTION.sub("", event.get("text") or "").strip()
        if not await self._remembered(ref, event, text):
            await self._take(ref, event, text)

    async def on_analyze(self, command: dict[str, Any]) -> str | None:
        """Start an analysis of a repository; returns an ephemeral error, or None."""
        refusal = self.policy.refusal(command.get("channel_id", ""), command.get("user_id", ""))
        if refusal or not self.engine.accepting:
            return refusal or wording.RESTARTING
        asked = (command.get("text") or "").strip().lower()
        place = (command.get("team_id", ""), command.get("channel_id", ""))
        if asked == "schedules":
            await self.schedule_list.show(*place)
            return None
        if asked == "memory" and self.store is not None:
            await self.memory_list.show(*place)
            return None
        return await self.analyses.start(command)

    async def on_stop(self, run_id: str, user: str, channel: str, thread_ts: str | None) -> None:
        """The Stop button, handled by the replica running the run: its asker's (or, with
        STOP_BY_ANYONE, anyone's who may use the bot); others are told, privately. A run
        not of the thread clicked in is not stopped."""
        run = await self.store.get_run(run_id) if self.store and run_id else None
        if run is None or not Click(user, channel, thread_ts).in_thread(run.key):
            await self.web.ephemeral(channel, user, wording.NOT_THIS_THREAD, thread_ts)
            return  # first: who asked another thread's run is not told either
        refusal = self.policy.stop_refusal(channel, user, run.user)
        if await self._turned_away(channel, user, thread_ts, refusal):
            return
        stop = {"kind": "stop", "run_id": run_id, "user": user, "channel": channel}
        if await self.router.here(run.key, {**stop, "thread_ts": thread_ts}):
            await self._stop(run_id, user, channel, thread_ts)

    async def on_session_stopped(self, event: dict[str, Any], body: dict[str, Any]) -> None:
        """Slack's stop button on the thread's agent session: the run going there stops as
        with the Stop button (the same rules on who may), handled by the thread's owner."""
        channel, thread_ts = event.get("channel") or "", event.get("thread_ts") or ""
        if not channel or not thread_ts:
            log.info("agent_session_stopped without a thread: ignored")
            return
        stopped_at = f"session-stop/{channel}/{thread_ts}/{event.get('event_ts')}"
        if not await self.coord.first_time(body.get("event_id", ""), stopped_at):
            return
        ref = ThreadRef(_team(event, body), channel, thread_ts)
        user = str(event.get("user") or "")
        if await self.router.here(ref.key, {"kind": "session_stop", "key": ref.key, "user": user}):
            await self._session_stop(ref, user)

    async def _session_stop(self, ref: ThreadRef, user: str) -> None:
        run_id = self.engine.running(ref.key)
        if run_id is None:
            if not await self._stop_before_start(ref, user):  # it ended as the stop came, say
                log.info("a stop on the agent session of %s, where no run goes: ignored", ref.key)
            return
        run = await self.store.get_run(run_id) if self.store else None
        refusal = self.policy.stop_refusal(ref.channel, user, run.user if run else "")
        if not await self._turned_away(ref.channel, user, ref.ts, refusal):
            log.info("run %s stopped from its agent session in Slack", run_id)
            await self.engine.stop(run_id, user)

    async def _stop_before_start(self, ref: ThreadRef, user: str) -> bool:
        """A stop before the run starts: the questions on their way (taken in here, or
        waiting for their run in the engine) are cancelled, if `user` may stop them."""

        async def may_stop(asker: str) -> bool:
            refusal = self.policy.stop_refusal(ref.channel, user, asker)
            return not await self._turned_away(ref.channel, user, ref.ts, refusal)

        arriving = [item for item in self._arriving.items() if item[0][0] == ref.key]
        for (key, ts), (asker, _) in arriving:
            if await may_stop(asker) and (key, ts) in self._arriving:
                self._arriving[key, ts] = (asker, user)
        return self.engine.stop_waiting(ref.key, user, may_stop) or bool(arriving)

    async def _stop(self, run_id: str, user: str, channel: str, thread_ts: str | None) -> None:
        if not await self.engine.stop(run_id, user) and channel:
            await self.web.ephemeral(channel, user, wording.RUN_ENDED, thread_ts)

    async def on_routed(self, message: dict[str, Any]) -> None:
        """An event another replica passed on: this replica owns its thread."""
        match message.get("kind"):
            case "mention" | "message" as kind:
                event, body = message["event"], message["body"]
                fallback = event.get("thread_ts") or event["ts"]
                ref = ThreadRef(_team(event, body), event["channel"], fallback)
                await (self._mention if kind == "mention" else self._follow_up)(ref, event)
            case "stop":
                args = (message["run_id"], message["user"], message["channel"])
                await self._stop(*args, message.get("thread_ts"))
            case "session_stop":
                stopped = ThreadRef.parse(message["key"])
                if stopped is not None:
                    await self._session_stop(stopped, message["user"])
            case "continue":
                click = Click(**message["click"])
                await self._continue(message["key"], message["grant_id"], click)
            case "firing" if self.scheduled is not None:
                await self.scheduled.routed(message)

    async def on_home_opened(self, event: dict[str, Any]) -> None:
        """Someone opened the bot's Messages tab: offer the suggested prompts (once per DM
        in this process)."""
        if self.assistant is not None and event.get("tab") == "messages":
            await self.dms.prompt_once(event.get("channel") or "")

    async def on_assistant_thread_started(self, event: dict[str, Any]) -> None:
        """A new assistant thread (workspaces with the older assistant view): its prompts."""
        thread = event.get("assistant_thread") or {}
        if self.assistant is not None and thread.get("channel_id") and thread.get("thread_ts"):
            await self.dms.suggest(thread["channel_id"], thread["thread_ts"])

    async def on_feedback(self, block_id: str, value: str, click: Click) -> None:
        """A click of an answer's feedback buttons, recorded against its run when the
        person may use the bot here."""
        run_id = block_id.removeprefix(block_kit.FEEDBACK_BLOCK)
        if self.store is None or not run_id or block_id == run_id:
            return
        if await self._refused_click(click):
            return
        try:
            await self.store.add_feedback(run_id, click.user, value, time.time())
        except StoreError as exc:
            log.warning("could not record feedback on run %s: %s", run_id, exc)

    async def on_continue(self, value: str, click: Click) -> None:
        """The Continue button: a further allowance for the thread, once per button, from
        anyone who may use the bot here; the run goes on."""
        if await self._refused_click(click):
            return
        key, grant_id = block_kit.continue_value(value)
        elsewhere = None if click.in_thread(key) else wording.NOT_THIS_THREAD
        if await self._turned_away(click.channel, click.user, click.thread_ts, elsewhere):
            return
        routed = {"kind": "continue", "key": key, "grant_id": grant_id, "click": vars(click)}
        if await self.router.here(key, routed):
            await self._continue(key, grant_id, click)

    async def _continue(self, key: str, grant_id: str, click: Click) -> None:
        if await self.engine.continue_run(key, click.user, grant_id) is None:
            said = wording.CONTINUE_USED if self.engine.accepting else wording.RESTARTING
            await self.web.ephemeral(click.channel, click.user, said, click.thread_ts)

    async def _refused_click(self, click: Click) -> bool:
        """Tell someone who may not use the bot here, privately; nothing changes."""
        refusal = self.policy.refusal(click.channel, click.user)
        return await self._turned_away(click.channel, click.user, click.thread_ts, refusal)

    async def _turned_away(
        self, channel: str, user: str, thread_ts: str | None, refusal: str | None
    ) -> bool:
        """With a `refusal`, tell `user` it privately (True); without one, False."""
        if refusal:
            await self.web.ephemeral(channel, user, refusal, thread_ts)
        return refusal is not None

    async def shutdown(self, grace_s: float) -> None:
        """Stop taking work; running turns get `grace_s` to finish, then are interrupted
        (their threads say so). Sandboxes are kept for the next start."""
        self.analyses.cancel()
        await self.engine.shutdown(grace_s)

    # -- the work --

    async def _refused(self, ref: ThreadRef, event: dict[str, Any]) -> bool:
        """Tell someone who may not use the bot here, privately; no session is made."""
        user = event.get("user", "")
        refusal = self.policy.refusal(ref.channel, user)
        return await self._turned_away(ref.channel, user, event.get("thread_ts"), refusal)

    async def _take(self, ref: ThreadRef, event: dict[str, Any], question: str) -> None:
        files = event.get("files") or []
        if not question and not files:  # no work yet: the thread is known, with no sandbox
            await self.engine.open(ref.key, start=False)
            await self.web.post(ref.channel, ref.ts, wording.WHAT_NEXT)
            return
        arriving = (ref.key, event.get("ts", ""))
        if question:  # a stop may cancel it before its run starts
            self._arriving[arriving] = (event.get("user", ""), "")
        try:
            await self._take_in(ref, event, question, files)
        finally:
            self._arriving.pop(arriving, None)

    async def _take_in(
        self, ref: ThreadRef, event: dict[str, Any], question: str, files: list[Any]
    ) -> None:
        assistant = await self._first_sign(ref, event, files)
        # Only a DM's first question titles it: elsewhere the store is not asked.
        titled = bool(question) and ref.channel.startswith("D")
        new = titled and not await self.engine.knows(ref.key)
        await self.engine.open(ref.key)
        if new:
            await self.dms.title(ref, question)
        taken = [await self.intake.take(ref, file) for file in files]
        if assistant and question and self.assistant is not None:
            self.assistant.hold(ref.key, taken)  # the run shows them, in its one message
        else:
            for note in taken:
                await self.web.post(ref.channel, ref.ts, note.text)
        _, stopped_by = self._arriving.get((ref.key, event.get("ts", "")), ("", ""))
        if question and stopped_by:
            await self.engine.stopped_before_start(ref.key, stopped_by)
        elif question:
            await self.engine.ask(ref.key, question, user=event.get("user", ""))

    async def _first_sign(self, ref: ThreadRef, event: dict[str, Any], files: list[Any]) -> bool:
        """Show at once that the question was seen: the agent session's `processing` where
        there are sessions, then in the assistant style the thread's status unless the session
        shows it (True), else :eyes: on the message."""
        session = await self._session_processing(ref)
        if session and self.assistant is not None and self.assistant.allowed(ref.team):
            return True  # Slack's own loading indicator and stop button say it
        if self.assistant is not None and self.assistant.allowed(ref.team):
            names = [safe_display(f.get("name") or "file") for f in files]
            loading = [wording.reading(name) for name in names[:10]] or [wording.READING_QUESTION]
            if await self.assistant.set_status(ref, loading):
                return True
        self.web.react(ref.channel, event["ts"], "eyes")
        return False

    async def _session_processing(self, ref: ThreadRef) -> bool:
        sessions = self.sessions
        if sessions is None or not sessions.available(ref.team):
            return False
        if sessions.status(ref) == PROCESSING:
            return True
        if sessions.would_wait():  # a burst of questions: the thread's status shows it now
            sessions.set_later(ref, PROCESSING)
            return False
        return await sessions.set(ref, PROCESSING)


def _team(event: dict[str, Any], body: dict[str, Any]) -> str:
    return str(event.get("team") or body.get("team_id") or "")


def _message_id(event: dict[str, Any]) -> str:
    return f"{event.get('channel')}/{event.get('ts')}"
