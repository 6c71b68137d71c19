"""Files in the fake Slack: files users share (``url_private*`` downloads that need the bot
token and answer a sign-in page without it, slack-platform.md §4), ``files.info``, and the
bot's uploads through the three-step external flow (§5).

Stricter than convenient, as Slack is:

- ``url_private_download`` answers an authorised request with a 302 to the CDN
  (cdn.py), another host; ``url_private`` serves the bytes itself.
- A file from a Slack Connect channel can arrive as a stub (``stub_of``): its id and
  ``"file_access": "check_file_info"``, no name, size or URLs (§3.3); ``files.info`` has
  the whole object.
- ``files.completeUploadExternal`` wants the bytes sent to the upload URL to be exactly
  the ``length`` declared to ``files.getUploadURLExternal`` (else ``invalid_arguments``, with
  a ``response_metadata`` message saying so), and ``thread_ts`` to be the ts of a message
  in that channel that is not itself a reply (else ``invalid_thread_ts``). The doc names no
  error for either; these are the fake's choices (``invalid_thread_ts`` is what Slack's
  assistant and stream methods answer for a bad ``thread_ts``).
- Sharing is asynchronous (§5): ``files.completeUploadExternal`` answers ``files`` (id and
  title, no message ``ts``) at once, and the share message (a ``file_share`` from the bot)
  lands in the conversation ``share_delay_s`` later. ``UploadedFile.shared_ts`` is set
  then; wait on it, not on the answer.
"""

from __future__ import annotations

import asyncio
import copy
import mimetypes
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import BodyPartReader, web

from tests.fakes.slack.cdn import FakeCdn, chunks
from tests.fakes.slack.common import TEAM_DOMAIN, Json, SlackError, json_arg, random_id

DOWNLOAD_CHUNK = 64 * 1024
STUB_FIELDS = ("id", "created", "timestamp", "user")  # what a Slack Connect stub keeps
LOGIN_PAGE = (
    "<!DOCTYPE html><html><head><title>Sign in | Slack</title></head>"
    "<body><h1>Sign in to fake-ws</h1><form action='/signin'></form></body></html>"
)


@dataclass
class UploadedFile:
    """A file the bot uploaded through the three-step external upload."""

    file_id: str
    filename: str
    title: str
    content: bytes
    channel_id: str | None = None  # the (first) conversation it was shared to
    thread_ts: str | None = None
    initial_comment: str | None = None
    declared_length: int = 0  # `length` given to files.getUploadURLExternal
    alt_txt: str | None = None  # an image's description, given to files.getUploadURLExternal
    shared_ts: str | None = None  # its share message, once Slack has posted it


@dataclass
class _StoredFile:
    meta: Json  # the Slack file object
    content: bytes


@dataclass
class _PendingUpload:
    file_id: str
    filename: str
    length: int
    content: bytes | None = None
    alt_txt: str | None = None


class FileFeatures:
    """Mixed into FakeSlack: files, their downloads and the bot's uploads."""

    base_url: str
    team_id: str
    bot_token: str
    bot_user_id: str
    scopes: tuple[str, ...]
    uploads: dict[str, UploadedFile]
    downloads: list[tuple[str, bool]]  # (file id, authorised)
    _files: dict[str, _StoredFile]
    _pending: dict[str, _PendingUpload]  # upload URL key -> upload
    cdn: FakeCdn | None  # where url_private_download redirects; None: no redirect
    share_delay_s: float  # how long after completeUploadExternal a share shows
    _tasks: set[asyncio.Task[None]]
    _sharing: set[asyncio.Task[None]]
    # provided by FakeSlack
    find_message: Any
    _bot_fields: Any
    _store: Any
    _echo: Any
    _as_event: Any

    def add_file(
        self,
        name: str,
        content: bytes,
        *,
        mimetype: str = "text/csv",
        filetype: str = "csv",
        user: str = "U0HUMAN01",
    ) -> Json:
        """A file a user uploaded; pass it to ``post_user_message(files=[...])``."""
        meta = self._new_file(name, name, content, mimetype, filetype, user)
        return copy.deepcopy(meta)

    @staticmethod
    def stub_of(file: Json) -> Json:
        """The file as a Slack Connect channel's event carries it: ``files.info`` has the rest."""
        return {**{k: file[k] for k in STUB_FIELDS}, "file_access": "check_file_info"}

    def _files_info(self, args: Json) -> Json:
        stored = self._files.get(str(args.get("file", "")))
        if stored is None:
            raise SlackError("file_not_found")
        return {
            "file": copy.deepcopy(stored.meta),
            "comments": [],
            "response_metadata": {"next_cursor": ""},
        }

    def _files_get_upload_url(self, args: Json) -> Json:
        filename = args.get("filename")
        try:
            length = int(args.get("length", ""))
        except ValueError:
            raise SlackError("invalid_arguments") from None
        if not filename or length < 0:
            raise SlackError("invalid_arguments")
        key = secrets.token_urlsafe(16)
        file_id = f"F{random_id(10)}"
        alt = args.get("alt_txt")
        self._pending[key] = _PendingUpload(file_id, str(filename), length, alt_txt=alt)
        return {"upload_url": f"{self.base_url}/upload/v1/{key}", "file_id": file_id}

    def _files_complete_upload(self, args: Json) -> Json:
        entries = json_arg(args, "files")
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        channels = [str(args["channel_id"])] if args.get("channel_id") else []
        channels += [c for c in str(args.get("channels") or "").split(",") if c]
        thread_ts = str(args["thread_ts"]) if args.get("thread_ts") else None
        if thread_ts:
            if len(channels) != 1:
                raise SlackError("invalid_arguments")
            self._check_parent(channels[0], thread_ts)
        for entry in entries:
            self._check_length(entry)
        uploads = [self._finish_upload(entry) for entry in entries]
        comment = args.get("initial_comment")
        for upload in uploads:
            upload.channel_id = channels[0] if channels else None
            upload.thread_ts, upload.initial_comment = thread_ts, comment
        for channel in channels:
            self._later(self._share, channel, uploads, thread_ts, comment)
        return {"files": [{"id": u.file_id, "title": u.title} for u in uploads]}

    def _check_parent(self, channel: str, thread_ts: str) -> None:
        """A file goes into a thread by its parent's ts; a reply's, or none, is refused."""
        parent = self.find_message(channel, thread_ts)
        if parent is None or parent.get("thread_ts", thread_ts) != thread_ts:
            raise SlackError("invalid_thread_ts")

    def _check_length(self, entry: Any) -> None:
        pending = self._pending_for(entry)[1]
        if pending.content is not None and len(pending.content) != pending.length:
            said = f"uploaded {len(pending.content)} bytes, but length was {pending.length}"
            raise SlackError(
                "invalid_arguments", response_metadata={"messages": [f"[ERROR] {said}"]}
            )

    def _pending_for(self, entry: Any) -> tuple[str, _PendingUpload]:
        file_id = entry.get("id") if isinstance(entry, dict) else None
        key = next((k for k, p in self._pending.items() if p.file_id == file_id), None)
        pending = self._pending.get(key or "")
        if key is None or pending is None or pending.content is None:
            raise SlackError("file_not_found")
        return key, pending

    def _finish_upload(self, entry: Any) -> UploadedFile:
        key, pending = self._pending_for(entry)
        del self._pending[key]
        name, content = pending.filename, pending.content
        title = str(entry.get("title") or name)
        mimetype = mimetypes.guess_type(name)[0] or "application/octet-stream"
        filetype = name.rpartition(".")[2].lower() if "." in name else "binary"
        self._new_file(name, title, content, mimetype, filetype, self.bot_user_id, pending.file_id)
        upload = UploadedFile(
            pending.file_id, name, title, content,
            declared_length=pending.length, alt_txt=pending.alt_txt,
        )  # fmt: skip
        self.uploads[upload.file_id] = upload
        return upload

    def shares_pending(self) -> int:
        """Shares of completed uploads that have not landed yet."""
        return sum(not t.done() for t in self._sharing)

    def _later(self, share: Any, *args: Any) -> None:
        async def run() -> None:
            await asyncio.sleep(self.share_delay_s)
            share(*args)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        self._sharing.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(self._sharing.discard)

    def _share(
        self, channel: str, uploads: list[UploadedFile], thread_ts: str | None, comment: Any
    ) -> None:
        """The bot's file-share message, a moment after completeUploadExternal."""
        files = [copy.deepcopy(self._files[u.file_id].meta) for u in uploads]
        fields = self._bot_fields({"text": str(comment or "")})
        fields.update(files=files, upload=True, display_as_bot=False)
        if thread_ts:
            fields["thread_ts"] = thread_ts
        message = self._store(channel, fields)
        for upload in uploads:
            upload.shared_ts = upload.shared_ts or message["ts"]
        self._echo(self._as_event(message, subtype="file_share"))

    def _new_file(
        self,
        name: str,
        title: str,
        content: bytes,
        mimetype: str,
        filetype: str,
        user: str,
        file_id: str | None = None,
    ) -> Json:
        file_id = file_id or f"F{random_id(10)}"
        now = int(time.time())
        path = f"{self.base_url}/files-pri/{self.team_id}-{file_id}"
        meta = {
            "id": file_id,
            "created": now,
            "timestamp": now,
            "name": name,
            "title": title,
            "mimetype": mimetype,
            "filetype": filetype,
            "pretty_type": filetype.upper(),
            "user": user,
            "user_team": self.team_id,
            "editable": False,
            "size": len(content),
            "mode": "hosted",
            "is_external": False,
            "external_type": "",
            "is_public": True,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "url_private": f"{path}/{quote(name, safe='')}",
            "url_private_download": f"{path}/download/{quote(name, safe='')}",
            "permalink": f"https://{TEAM_DOMAIN}.slack.com/files/{user}/{file_id}/{quote(name)}",
            "file_access": "visible",
        }
        self._files[file_id] = _StoredFile(meta, content)
        return meta

    async def _upload(self, request: web.Request) -> web.Response:
        pending = self._pending.get(request.match_info["key"])
        if pending is None:
            return web.Response(status=404, text="upload URL not found or expired")
        if request.content_type == "multipart/form-data":
            content = b""
            reader = await request.multipart()
            async for part in reader:
                if isinstance(part, BodyPartReader) and part.filename is not None:
                    content = await part.read()
                    break
        else:
            content = await request.read()
        pending.content = content
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    async def _download(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["team_file"].rpartition("-")[2]
        stored = self._files.get(file_id)
        if stored is None:
            return web.Response(status=404, text=LOGIN_PAGE, content_type="text/html")
        authorised = (
            request.headers.get("Authorization") == f"Bearer {self.bot_token}"
            and "files:read" in self.scopes
        )
        self.downloads.append((file_id, authorised))
        if not authorised:  # Slack answers a sign-in page, status 200
            return web.Response(text=LOGIN_PAGE, content_type="text/html")
        meta = stored.meta
        if "/download/" in request.path and self.cdn is not None:
            raise web.HTTPFound(self.cdn.link(meta["name"], meta["mimetype"], stored.content))
        disposition = "attachment" if "/download/" in request.path else "inline"
        name = quote(stored.meta["name"])
        response = web.StreamResponse(
            headers={
                "Content-Type": stored.meta["mimetype"],
                "Content-Disposition": f"{disposition}; filename*=UTF-8''{name}",
            }
        )
        response.enable_chunked_encoding()
        await response.prepare(request)
        for chunk in chunks(stored.content, DOWNLOAD_CHUNK):
            await response.write(chunk)
        await response.write_eof()
        return response
