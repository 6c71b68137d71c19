"""The bot's one seam to Slack's Web API: every call goes out from here, paced to stay
inside Slack's rate tiers (pacing.py), its payload cleaned (outgoing.py: secrets, crowd
mentions), and Slack's refusals read into the bot's own errors (errors.py).

Posts go out in order, a few at once at most per channel; edits of one message are
coalesced (only the newest text is sent). A 429 that still comes (another process sharing
the workspace's limits, say) is waited out by the client's retry handler (Retry-After).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.scrub import NO_SECRETS, Scrubber
from bot.slack.web.edits import Edits
from bot.slack.web.errors import SlackError, slack_error
from bot.slack.web.outgoing import Outgoing
from bot.slack.web.pacing import OnWait, Pacer
from bot.slack.web.uploads import UPLOAD_TIMEOUT, post_bytes, scrubbed

log = logging.getLogger(__name__)

# No link previews: Slack fetches a link it unfurls, so an answer steered by a hostile file
# could send data to any server just by naming it. The SDK takes these on chat.postMessage;
# chat.postEphemeral and chat.update get them too (passed on as extra arguments): every
# message below is sent with unfurl_links and unfurl_media false.


def build_client(
    token: str,
    api_url: str,
    session: aiohttp.ClientSession | None = None,
    watcher: AsyncRetryHandler | None = None,
) -> AsyncWebClient:
    """One Web API client; 429s are waited out (Retry-After), dropped connections retried.
    With `session`, calls reuse its connections instead of opening one each; `watcher` is
    asked about every attempt before the handlers that retry (it counts errors)."""
    return AsyncWebClient(
        token=token,
        base_url=api_url,
        session=session,
        retry_handlers=[
            *([watcher] if watcher else []),
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=4),
        ],
    )


async def answer(method: str, call: Awaitable[Any]) -> Any:
    """`call`'s response; Slack's refusal as the bot's SlackError."""
    try:
        return await call
    except SlackApiError as exc:
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        code = str(data.get("error") or "")
        meta = data.get("response_metadata")
        said = meta.get("messages") if isinstance(meta, dict) else None
        messages = tuple(str(m) for m in said) if isinstance(said, list) else ()
        raise slack_error(method, code, exc.response.status_code, messages) from None


async def probe(api_url: str, timeout_s: int, *, bot: str = "", app: str = "") -> dict[str, Any]:
    """What Slack says of a bot token (auth.test) or, without one, of an app token
    (apps.connections.open: the cheapest call it may make). One try, no retry handler."""
    client = AsyncWebClient(base_url=api_url, timeout=timeout_s, retry_handlers=[])
    if bot:
        return dict((await answer("auth.test", client.auth_test(token=bot))).data)
    call = client.apps_connections_open(app_token=app)  # its Socket Mode URL goes unused
    return dict((await answer("apps.connections.open", call)).data)


class SlackWeb:
    def __init__(
        self, client: AsyncWebClient, *, rate_scale: float = 1.0, scrubber: Scrubber = NO_SECRETS
    ) -> None:
        self.client = client
        self.clean = Outgoing(scrubber)  # every payload passes it: secrets, crowd mentions
        self.pacer = Pacer(rate_scale)
        self._replied: dict[tuple[str, str], float] = {}  # thread -> its last reply from us
        self._background: set[asyncio.Task[None]] = set()  # reactions on their way
        self.edits = Edits(self.update)  # chat.update, coalesced per message

    async def pace(self, method: str, on_wait: OnWait | None = None) -> None:
        """Wait for `method`'s turn. The stream calls are paced by the view before it sends
        them, so that what it adds meanwhile goes with the call."""
        await self.pacer.take(method, on_wait=on_wait)

    async def _call(self, method: str, call: Callable[[], Awaitable[Any]]) -> Any:
        await self.pacer.take(method)
        return await answer(method, call())

    async def post(
        self,
        channel: str,
        thread_ts: str | None,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str:
        """Post a message (in a thread when `thread_ts`); returns its ts."""
        await self.pacer.take("chat.postMessage", channel)
        response = await answer(
            "chat.postMessage",
            self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=self.clean.text(text),
                blocks=self.clean.data(blocks), unfurl_links=False, unfurl_media=False,
            ),
        )  # fmt: skip
        self._reply(channel, thread_ts)
        return str(response["ts"])

    async def update(self, channel: str, ts: str, text: str, blocks: list[dict[str, Any]]) -> None:
        """Replace a message's content now (`edits` coalesces a run's edits)."""
        call = lambda: self.client.chat_update(  # noqa: E731
            channel=channel, ts=ts, text=self.clean.text(text), blocks=self.clean.data(blocks),
            unfurl_links=False, unfurl_media=False,
        )  # fmt: skip
        await self._call("chat.update", call)

    def replied_at(self, channel: str, thread_ts: str) -> float:
        """When the bot last posted in the thread (0 if never, in this process)."""
        return self._replied.get((channel, thread_ts), 0.0)

    def _reply(self, channel: str, thread_ts: str | None) -> None:
        if thread_ts:
            self._replied[(channel, thread_ts)] = time.monotonic()

    def react(self, channel: str, ts: str, name: str) -> None:
        """Add a reaction soon, in the background: reactions share a workspace-wide tier (50
        a minute), and a question must not wait for its :eyes: before its run starts."""
        task = asyncio.create_task(self._react(channel, ts, name))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _react(self, channel: str, ts: str, name: str) -> None:
        try:
            call = lambda: self.client.reactions_add(channel=channel, timestamp=ts, name=name)  # noqa: E731
            await self._call("reactions.add", call)
        except SlackError as exc:
            if exc.code != "already_reacted":
                log.warning("could not add :%s: to %s: %s", name, ts, exc.code)

    async def user_zone(self, user: str) -> str | None:
        """The IANA time zone a user set in Slack (users.info `tz`), or None when Slack does
        not say (no `users:read` scope, an unknown user, no zone set)."""
        try:
            response = await self._call("users.info", lambda: self.client.users_info(user=user))
        except SlackError as exc:
            log.warning("could not read %s's time zone: %s", user, exc.code or exc)
            return None
        zone = (response.get("user") or {}).get("tz")
        return zone if isinstance(zone, str) and zone else None

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> None:
        call = lambda: self.client.chat_postEphemeral(  # noqa: E731
            channel=channel, user=user, text=self.clean.text(text), thread_ts=thread_ts,
            unfurl_links=False, unfurl_media=False,
        )  # fmt: skip
        await self._call("chat.postEphemeral", call)

    async def respond(self, response_url: str, text: str) -> None:
        """A private reply to a slash command through its response_url, which works even
        where the bot cannot post (a channel it is not in)."""
        webhook = AsyncWebhookClient(response_url, session=self.client.session)
        response = await webhook.send(
            text=self.clean.text(text),
            response_type="ephemeral",
            unfurl_links=False,
            unfurl_media=False,
        )
        if response.status_code != 200:
            log.warning("could not answer a slash command: HTTP %s", response.status_code)

    async def upload(
        self, channel: str, thread_ts: str, files: list[dict[str, Any]], on_wait: OnWait | None
    ) -> list[str]:
        """Attach files to a thread (render.upload items), streamed and scrubbed through
        Slack's external upload (uploads.py); returns their file ids, in the order given.
        Slack shares them a moment later, and its answer names no message: this is no reply
        of ours that would clear the thread's status."""
        await self.pacer.take("files.upload", count=len(files) + 1, on_wait=on_wait)
        shared = []
        async with httpx.AsyncClient(timeout=UPLOAD_TIMEOUT) as http:
            for item in files:
                meta = self.clean.data({k: v for k, v in item.items() if k != "content"})
                length, chunks = await scrubbed(item["content"], self.clean.scrubber)
                call = self.client.files_getUploadURLExternal(
                    filename=meta["filename"], length=length, alt_txt=meta.get("alt_txt")
                )
                got = await answer("files.upload", call)
                await post_bytes(http, str(got["upload_url"]), length, chunks)
                title = meta.get("title") or meta["filename"]
                shared.append({"id": str(got["file_id"]), "title": title})
        call = self.client.files_completeUploadExternal(
            files=shared, channel_id=channel, thread_ts=thread_ts
        )
        await answer("files.upload", call)
        return [str(item["id"]) for item in shared]

    async def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        """Open a modal for whoever clicked (views.open). Not paced: the click's trigger is
        good for 3 seconds only, and views.open's tier (100 a minute) is far above a
        person's clicks."""
        call = self.client.views_open(trigger_id=trigger_id, view=self.clean.data(view))
        await answer("views.open", call)

    async def set_status(
        self, channel: str, thread_ts: str, status: str, loading: list[str] | None = None
    ) -> None:
        """The thread's status line ("is analyzing…"); "" clears it."""
        call = lambda: self.client.assistant_threads_setStatus(  # noqa: E731
            channel_id=channel, thread_ts=thread_ts, status=self.clean.text(status),
            loading_messages=[self.clean.text(m) for m in loading] if loading else None,
        )  # fmt: skip
        await self._call("assistant.threads.setStatus", call)

    async def start_stream(
        self, channel: str, thread_ts: str, recipient: tuple[str, str], chunks: list[dict[str, Any]]
    ) -> str:
        """Start a streamed reply in a thread, for (user, team); returns its ts (paced by
        the caller, see `pace`)."""
        call = self.client.chat_startStream(
            channel=channel, thread_ts=thread_ts, recipient_user_id=recipient[0],
            recipient_team_id=recipient[1], chunks=self.clean.data(chunks),
            task_display_mode="plan",
        )  # fmt: skip
        response = await answer("chat.startStream", call)
        self._reply(channel, thread_ts)
        return str(response["ts"])

    async def append_stream(self, channel: str, ts: str, chunks: list[dict[str, Any]]) -> None:
        call = self.client.chat_appendStream(channel=channel, ts=ts, chunks=self.clean.data(chunks))
        await answer("chat.appendStream", call)

    async def stop_stream(
        self,
        channel: str,
        ts: str,
        chunks: list[dict[str, Any]],
        blocks: list[dict[str, Any]] | None,
        session_status: str | None = None,
    ) -> None:
        """End a stream with its last `chunks` and `blocks` at the bottom; with
        `session_status`, the thread's agent session moves to it at the same time."""
        call = self.client.chat_stopStream(
            channel=channel, ts=ts, chunks=self.clean.data(chunks) or None,
            blocks=self.clean.data(blocks), session_status=session_status,
        )  # fmt: skip
        await answer("chat.stopStream", call)

    async def set_session_status(self, channel: str, thread_ts: str, status: str) -> str:
        """The thread's agent session status (processing, active, suspended, closed),
        creating the session if there is none; returns Slack's warning ("" if none)."""
        call = lambda: self.client.agents_sessions_setStatus(  # noqa: E731
            channel_id=channel, thread_ts=thread_ts, status=status
        )
        response = await self._call("agents.sessions.setStatus", call)
        return str(response.get("warning") or "")

    async def set_title(self, channel: str, thread_ts: str, title: str) -> None:
        """A DM thread's title (agent and assistant views)."""
        call = lambda: self.client.assistant_threads_setTitle(  # noqa: E731
            channel_id=channel, thread_ts=thread_ts, title=self.clean.text(title)
        )
        await self._call("assistant.threads.setTitle", call)

    async def suggest(
        self, channel: str, thread_ts: str | None, prompts: list[dict[str, Any]]
    ) -> None:
        """Suggested prompts for a DM (pinned to its Messages tab without `thread_ts`)."""
        call = lambda: self.client.assistant_threads_setSuggestedPrompts(  # noqa: E731
            channel_id=channel, thread_ts=thread_ts, prompts=self.clean.data(prompts)
        )
        await self._call("assistant.threads.setSuggestedPrompts", call)

    async def create_canvas(self, title: str, markdown: str) -> str:
        """A standalone canvas holding `markdown`; returns its id (a file id, F…)."""
        content = {"type": "markdown", "markdown": self.clean.text(markdown)}
        call = lambda: self.client.canvases_create(  # noqa: E731
            title=self.clean.text(title), document_content=content
        )
        return str((await self._call("canvases.create", call))["canvas_id"])

    async def replace_canvas(self, canvas_id: str, markdown: str) -> None:
        """Replace the whole of a canvas's content (one change per call, as Slack allows)."""
        content = {"type": "markdown", "markdown": self.clean.text(markdown)}
        changes = [{"operation": "replace", "document_content": content}]
        call = lambda: self.client.canvases_edit(canvas_id=canvas_id, changes=changes)  # noqa: E731
        await self._call("canvases.edit", call)

    async def share_canvas(self, canvas_id: str, channel: str, level: str) -> None:
        """Let a channel's members open a canvas (`level`: read, write or owner)."""
        call = lambda: self.client.canvases_access_set(  # noqa: E731
            canvas_id=canvas_id, access_level=level, channel_ids=[channel]
        )
        await self._call("canvases.access.set", call)

    async def delete_canvas(self, canvas_id: str) -> None:
        call = lambda: self.client.canvases_delete(canvas_id=canvas_id)  # noqa: E731
        await self._call("canvases.delete", call)

    async def thread_files(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The file objects shared in a thread's messages (its first 200 messages)."""
        call = lambda: self.client.conversations_replies(  # noqa: E731
            channel=channel, ts=thread_ts, limit=200
        )
        response = await self._call("conversations.replies", call)
        return [f for m in response.get("messages") or [] for f in m.get("files") or []]

    async def file_info(self, file_id: str) -> dict[str, Any]:
        """A file's whole object (files.info)."""
        response = await self._call("files.info", lambda: self.client.files_info(file=file_id))
        return dict(response["file"])
