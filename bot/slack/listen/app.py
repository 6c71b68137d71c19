"""The Slack app: Bolt `AsyncApp` in Socket Mode, wired to the engine."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from bot.compose import Runtime, build_coordinator, build_store
from bot.errors import ConfigError
from bot.monitoring import Health, Metrics, MonitoringServer, SlackErrors, metered
from bot.sandbox.base import SandboxProvider
from bot.schedules.scheduler import Scheduler
from bot.sessions.takeover import take_over_forever
from bot.settings import Settings
from bot.slack.listen.channel_memory import ChannelMemory
from bot.slack.listen.files import SlackFiles
from bot.slack.listen.handlers import SlackListeners
from bot.slack.listen.policy import Policy
from bot.slack.listen.schedule_firings import SlackFirings
from bot.slack.listen.startup import SlackSetupError, check_slack
from bot.slack.render import memory_blocks, schedule_blocks
from bot.slack.render.block_kit import (
    CONTINUE_ACTION,
    FEEDBACK_ACTION,
    NOTEBOOK_ACTION,
    SHOW_WORK_ACTION,
    STOP_ACTION,
)
from bot.slack.threads import Click, channel_of
from bot.slack.view.agent_sessions import AgentSessions
from bot.slack.view.assistant_threads import AssistantThreads
from bot.slack.view.note_proposals import NoteProposals
from bot.slack.view.run_extras import DataSurfaces
from bot.slack.view.run_view import views
from bot.slack.view.schedule_proposals import ScheduleLimits, ScheduleProposals
from bot.slack.web import SlackWeb, build_client
from bot.sql.config import Scope

log = logging.getLogger(__name__)
CONNECT_TIMEOUT_S = 30
LINK_DISABLED = (
    "Slack turned Socket Mode off for this app (disconnect: link_disabled): turn it on "
    "again on the app's Socket Mode settings page, then start the bot again."
)


def slack_tokens(settings: Settings) -> tuple[str, str]:
    """The bot and app tokens, checked for their shapes (xoxb-, xapp-)."""
    bot = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else ""
    app = settings.slack_app_token.get_secret_value() if settings.slack_app_token else ""
    expected = (("SLACK_BOT_TOKEN", bot, "xoxb-"), ("SLACK_APP_TOKEN", app, "xapp-"))
    for name, value, prefix in expected:
        if not value.startswith(prefix):
            problem = "is not set" if not value else f"should start with {prefix}"
            raise ConfigError(
                f"Configuration error: {name} {problem}. Set it in the environment or in .env "
                "(see the README: Slack app set-up)."
            )
    return bot, app


def bolt_auth(client: AsyncWebClient, identity: dict[str, Any] | None) -> dict[str, Any]:
    """How Bolt learns who the bot is. Left to itself Bolt calls auth.test on the first
    event, before acking it: a slow or rate-limited answer misses Slack's 3 s deadline and
    the event comes again. The startup check's answer (`identity`) is handed over instead."""
    if identity is None:  # Slack was too busy at startup: Bolt asks on the first event
        return {"client": client}
    known = AuthorizeResult.from_auth_test_response(
        bot_token=client.token, auth_test_response=identity
    )

    async def authorize() -> AuthorizeResult:
        return known

    # Bolt's own client goes without the token: with both, Bolt warns that it ignores it
    # (each event's client gets it from `authorize`); same URL, connections and retries
    bolt_client = AsyncWebClient(
        base_url=client.base_url, session=client.session, retry_handlers=client.retry_handlers
    )
    return {"client": bolt_client, "authorize": authorize}


def build_app(
    bot: SlackListeners, client: AsyncWebClient, identity: dict[str, Any] | None
) -> AsyncApp:
    app = AsyncApp(**bolt_auth(client, identity))

    @app.event("app_mention")
    async def mention(event: dict[str, Any], body: dict[str, Any]) -> None:
        await bot.on_mention(event, body)

    @app.event("message")  # every subtype, so edits and deletions are acknowledged too
    async def message(event: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        await bot.on_message(event, body, context.bot_user_id)

    @app.command("/analyze")
    async def analyze(ack: Any, command: dict[str, Any]) -> None:
        error = await bot.on_analyze(command)
        # the ack goes out through Bolt, not the web: it is cleaned here
        said = bot.web.clean.text(error) if error else None
        await (ack(text=said, response_type="ephemeral") if said else ack())

    @app.event("app_home_opened")
    async def home_opened(event: dict[str, Any]) -> None:
        await bot.on_home_opened(event)

    @app.event("agent_session_stopped")  # Slack's stop button on a thread's agent session
    async def session_stopped(event: dict[str, Any], body: dict[str, Any]) -> None:
        await bot.on_session_stopped(event, body)

    @app.event("assistant_thread_started")
    async def thread_started(event: dict[str, Any]) -> None:
        await bot.on_assistant_thread_started(event)

    @app.action(STOP_ACTION)
    async def stop(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        click = Click.of(body)
        await bot.on_stop(action.get("value", ""), click.user, click.channel, click.thread_ts)

    @app.action(CONTINUE_ACTION)
    async def go_on(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        await bot.on_continue(action.get("value", ""), Click.of(body))

    @app.action(FEEDBACK_ACTION)
    async def feedback(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        click = Click.of(body)
        await bot.on_feedback(action.get("block_id", ""), action.get("value", ""), click)

    @app.action(schedule_blocks.CONFIRM_ACTION)
    async def confirm_schedule(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        message_ts = _message_ts(body)
        await bot.schedule_buttons.confirm(action.get("value", ""), Click.of(body), message_ts)

    @app.action(schedule_blocks.CANCEL_ACTION)
    async def cancel_schedule(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        message_ts = _message_ts(body)
        await bot.schedule_buttons.cancel(action.get("value", ""), Click.of(body), message_ts)

    @app.action(schedule_blocks.RETRY_ACTION)
    async def retry_firing(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        message_ts = _message_ts(body)
        await bot.schedule_buttons.retry(action.get("value", ""), Click.of(body), message_ts)

    @app.action(memory_blocks.SAVE_ACTION)
    async def save_note(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        message_ts = _message_ts(body)
        team = _team_id(body)
        if bot.memory is not None:
            await bot.memory.save_proposed(
                team, action.get("value", ""), Click.of(body), message_ts
            )

    @app.action(memory_blocks.FORGET_ACTIONS)
    async def forget_note(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        message_ts = _message_ts(body)
        team = _team_id(body)
        verb, value, click = (
            str(action.get("action_id", "")),
            action.get("value", ""),
            Click.of(body),
        )
        await bot.memory_list.forget(team, verb, value, click, message_ts)

    @app.action(schedule_blocks.MANAGE_ACTIONS)
    async def manage(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        message_ts = _message_ts(body)
        verb = str(action.get("action_id", "")).partition(":")[0]
        await bot.schedule_list.act(verb, action.get("value", ""), Click.of(body), message_ts)

    @app.action(SHOW_WORK_ACTION)
    async def show_work(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()  # first: the modal must open within the trigger's 3 s
        trigger = str(body.get("trigger_id") or "")
        await bot.work.show_work(action.get("value", ""), trigger, Click.of(body))

    @app.action(NOTEBOOK_ACTION)
    async def notebook(ack: Any, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        await bot.work.notebook(action.get("value", ""), Click.of(body))

    return app


class LinkWatch:
    """Slack's ``disconnect`` with reason ``link_disabled``: Socket Mode was turned off for
    the app. The SDK reconnects on it as on any disconnect, is told the same at once and
    loops at full speed; the client is closed instead, and `off` set so the app stops."""

    def __init__(self, client: SocketModeClient) -> None:
        self.off = asyncio.Event()
        self._client = client
        self._closing: asyncio.Task[None] | None = None
        client.on_message_listeners.append(self._on_frame)

    async def _on_frame(self, message: aiohttp.WSMessage) -> None:
        if self.off.is_set() or not _link_disabled(message):
            return
        self.off.set()
        # its own task: this runs in the client's receive task, which closing cancels
        self._closing = asyncio.create_task(self._client.close())  # type: ignore[no-untyped-call]  # slack-sdk leaves it unannotated


def _link_disabled(message: aiohttp.WSMessage) -> bool:
    if message.type != aiohttp.WSMsgType.TEXT or "link_disabled" not in message.data:
        return False
    try:
        frame = json.loads(message.data)
    except ValueError:
        return False
    if not isinstance(frame, dict):
        return False
    return frame.get("type") == "disconnect" and frame.get("reason") == "link_disabled"


async def first_set(*events: asyncio.Event) -> None:
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _message_ts(body: dict[str, Any]) -> str:
    """The message a button was clicked in (what an answer to the click edits)."""
    return str((body.get("message") or {}).get("ts") or "")


def _team_id(body: dict[str, Any]) -> str:
    return str((body.get("team") or {}).get("id") or "")


async def _none() -> str:
    return ""


async def _nothing() -> str | None:
    return None


async def serve(
    settings: Settings, stop: asyncio.Event, provider: SandboxProvider | None = None
) -> None:
    """Run the app until `stop` is set, then shut down (sessions and sandboxes are kept for
    the next start; a turn still running after the grace period is interrupted).
    `provider` replaces the one the settings describe (benchmarks bring their own).
    Socket Mode turned off for the app shuts down the same way, then raises SlackSetupError
    (one line naming the fix, instead of reconnecting forever)."""
    bot_token, app_token = slack_tokens(settings)
    identity = await check_slack(bot_token, app_token, settings.slack_api_url)
    metrics = Metrics()
    store = metered(build_store(settings), metrics)
    await store.open()
    memory: ChannelMemory | None = None  # made with the web client, which needs the runtime
    runtime = Runtime.from_settings(
        settings, provider, Scope(place_of=channel_of),
        context=lambda key, question: memory.context_for(key, question) if memory else _none(),
        definitions=lambda key, name: memory.definition_for(key, name) if memory else _nothing(),
    )  # fmt: skip
    http = aiohttp.ClientSession()
    client = build_client(bot_token, settings.slack_api_url, http, SlackErrors(metrics))
    web = SlackWeb(
        client,
        rate_scale=settings.slack_rate_scale,
        scrubber=runtime.scrubber,
    )
    memory = ChannelMemory(
        web, store, max_notes=settings.channel_notes_max,
        max_chars=settings.channel_note_max_chars,
        prompt_chars=settings.channel_notes_prompt_chars,
    )  # fmt: skip
    cdn = Settings.id_list(settings.slack_cdn_origins)
    files = SlackFiles(bot_token, settings.slack_api_url, http, web, cdn_origins=cdn)

    assistant = AssistantThreads(web) if settings.slack_ui == "assistant" else None
    # The engine, made below from these views, holds each thread's fencing token.
    data = DataSurfaces.of(web, store, lambda key: engine.token(key))
    sessions = AgentSessions(web)  # in either style: the session's stop button is Slack's
    limits = ScheduleLimits(
        settings.schedule_min_interval_s,
        settings.schedules_per_channel,
        settings.schedules_per_workspace,
    )
    view_for = views(
        web, settings.max_cost_usd_per_run, assistant=assistant, sessions=sessions, data=data,
        schedules=ScheduleProposals(web, store, limits), notes=NoteProposals(web),
    )  # fmt: skip

    coord = build_coordinator(settings)
    opener = lambda source: lambda: files.stream(source)  # noqa: E731
    engine = runtime.engine(store, view_for, opener, coord=coord, observers=metrics.counter)
    metrics.watch(engine)
    policy = Policy.from_settings(settings)
    bot = SlackListeners(
        engine, web, files, policy=policy, store=store, assistant=assistant, coord=coord,
        sessions=sessions, memory=memory,
    )  # fmt: skip
    firings = SlackFirings(engine, web, store, policy, bot.router)
    scheduler = Scheduler(store, firings.fire, replica=coord.replica, paused=firings.paused)
    firings.finish, bot.scheduled = scheduler.finish, firings
    ticking: asyncio.Task[None] | None = None
    pool = runtime.warm_pool(store, turn=lambda: coord.job("pool"))
    sweeper = runtime.orphan_sweeper(
        engine, turn=lambda: coord.job("orphans"), pool=pool,
        keeper=runtime.snapshot_keeper(store),
    )  # fmt: skip
    pruner = runtime.pruner(store, turn=lambda: coord.job("prune"))
    app = build_app(bot, client, identity)
    handler = AsyncSocketModeHandler(app, app_token, web_client=client)
    link = LinkWatch(handler.client)
    health = Health(store, handler.client.is_connected)
    monitor = MonitoringServer(metrics, health, settings.metrics_host, settings.metrics_port)
    metrics.watch_leases(coord)
    takeover: asyncio.Task[None] | None = None
    try:
        await monitor.start()  # before Slack: /healthz says 503 until connected
        await coord.open(bot.on_routed)
        # Alone, every run in flight was cut by this process's last stop; with replicas, only
        # those whose replica died, which another replica may be taking over right now.
        interrupted = [] if settings.redis_url else await engine.restore()
        if settings.redis_url:
            takeover = asyncio.create_task(take_over_forever(store, coord, engine.adopt))
        if settings.orphan_cleanup:
            sweeper.start()
        engine.start_reaper()
        pruner.start()
        if pool is not None:
            pool.start()
        connecting = handler.connect_async()  # type: ignore[no-untyped-call]  # unannotated in slack-bolt
        await asyncio.wait_for(connecting, CONNECT_TIMEOUT_S)
        log.info(
            "Connected to Slack (Socket Mode); sandboxes: %s; replica %s",
            settings.backend,
            coord.replica,
        )
        await engine.tell_interrupted(interrupted)
        ticking = asyncio.create_task(scheduler.run(settings.schedule_tick_s, stop))
        await first_set(stop, link.off)
        log.info("Shutting down")
    finally:
        health.draining = True  # load balancers stop sending work here first
        try:
            # no new events from here on (unannotated in slack-bolt)
            await handler.close_async()  # type: ignore[no-untyped-call]
            if takeover is not None:
                takeover.cancel()
            if ticking is not None:
                ticking.cancel()
            await sweeper.stop()
            await pruner.stop()
            if pool is not None:
                await pool.stop()
            await bot.shutdown(settings.shutdown_grace_s)
            await coord.close()  # its threads are free for the other replicas
            await http.close()
            await runtime.close()
            await store.close()
        finally:
            await monitor.stop()
    if link.off.is_set():
        raise SlackSetupError(LINK_DISABLED)
