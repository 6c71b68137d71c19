"""A thread's report.md as a Slack canvas: created on the first report, shared with the
channel (read access: the bot rewrites it on follow-ups, which would lose people's edits),
and replaced in place when a follow-up rewrites the report. The canvas's id is kept with
the session in the store, so a restart or another replica updates the same canvas.

A workspace without canvases for the bot (a free plan, which allows only channel tabs; a
missing scope; canvases turned off) gets the file alone; why is logged once per team."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from bot.slack.render import canvas_text
from bot.slack.threads import ThreadRef
from bot.slack.web import SlackWeb
from bot.slack.web.errors import SlackError, SlackRefused
from bot.store.base import SessionStore

log = logging.getLogger(__name__)

ACCESS = "read"
# Answers that say this workspace gives the bot no canvases (as opposed to one failure).
NO_CANVASES = frozenset(
    {
        "canvas_disabled_user_team",
        "free_teams_cannot_create_standalone_canvases",
        "free_teams_cannot_create_non_tabbed_canvases",
        "free_teams_cannot_edit_standalone_canvases",
        "team_tier_cannot_create_channel_canvases",
        "restricted_action",
    }
)
GONE = frozenset({"canvas_not_found", "canvas_deleted"})  # someone deleted it: a new one


TokenFor = Callable[[str], int | None]  # the fencing token a thread's writes carry here


class ReportCanvases:
    def __init__(
        self, web: SlackWeb, store: SessionStore | None, token_for: TokenFor = lambda key: None
    ) -> None:
        """`token_for`: the engine's token for a thread, so that a replica the thread was
        taken from cannot overwrite the canvas id its new owner keeps."""
        self._web, self._store, self._token_for = web, store, token_for
        self._without: set[str] = set()  # teams whose workspace gives the bot no canvases

    async def publish(self, ref: ThreadRef, report: str) -> str | None:
        """The id of the canvas showing `report` for the thread (made or updated), or None
        when there is none (the report goes as a file alone)."""
        document = canvas_text.markdown(report)
        if ref.team in self._without or document is None:
            return None
        digest = hashlib.sha256(document.encode("utf-8", "replace")).hexdigest()
        saved = await self._saved(ref.key)
        try:
            canvas_id = await self._write(ref, saved, document, digest, canvas_text.title(report))
        except SlackError as exc:
            self._refused(ref, exc)
            return None
        except Exception as exc:  # a network failure, say: the report goes as a file
            log.warning("could not put thread %s's report in a canvas: %r", ref.key, exc)
            return None
        if saved != {"id": canvas_id, "sha": digest}:
            await self._save(ref.key, {"id": canvas_id, "sha": digest})
        return canvas_id

    async def _write(
        self, ref: ThreadRef, saved: dict[str, Any], document: str, digest: str, title: str
    ) -> str:
        if saved.get("id") and saved.get("sha") == digest:
            return str(saved["id"])  # the report did not change
        if saved.get("id"):
            try:
                await self._web.replace_canvas(saved["id"], document)
                return str(saved["id"])
            except SlackError as exc:
                if exc.code not in GONE:
                    raise
        canvas_id = await self._web.create_canvas(title, document)
        try:
            await self._web.share_canvas(canvas_id, ref.channel, ACCESS)
        except SlackError:
            await self._delete(canvas_id)  # no one could open it
            raise
        return canvas_id

    def _refused(self, ref: ThreadRef, exc: SlackError) -> None:
        if isinstance(exc, SlackRefused) or exc.code in NO_CANVASES:
            if ref.team not in self._without:
                self._without.add(ref.team)
                log.warning(
                    "Workspace %s gives the bot no canvases (%s); reports go as files only",
                    ref.team, exc.code,
                )  # fmt: skip
            return
        log.warning("could not put thread %s's report in a canvas: %s", ref.key, exc)

    async def _delete(self, canvas_id: str) -> None:
        try:
            await self._web.delete_canvas(canvas_id)
        except SlackError as exc:
            log.warning("could not delete canvas %s: %s", canvas_id, exc.code)

    async def _saved(self, key: str) -> dict[str, Any]:
        record = await self._store.get_session(key) if self._store else None
        try:
            saved = json.loads(record.canvas) if record and record.canvas else {}
        except ValueError:
            return {}
        return saved if isinstance(saved, dict) else {}

    async def _save(self, key: str, canvas: dict[str, Any]) -> None:
        if self._store is None:
            return
        try:
            token = self._token_for(key)
            await self._store.update_session(key, canvas=json.dumps(canvas), token=token)
        except Exception as exc:  # the canvas stands; a later report makes another
            log.warning("could not keep thread %s's canvas id: %s", key, exc)
