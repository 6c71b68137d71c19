"""Canvases in the fake Slack: ``canvases.*`` and ``conversations.canvases.create``.

A canvas is a file (``F…`` id): ``files.info`` answers it with ``filetype: "canvas"``, its
title and a ``permalink`` of ``https://<domain>.slack.com/docs/<team>/<id>`` (the
convention implementations build; the field is the standard file one), and its download is
the stored markdown. Its markdown is kept as sections: each heading (``#`` to ``###``) starts
one, and what comes before the first heading is one; section ids look like
``temp:C:<28 characters>``. Where the docs leave room, the fake picks:

- ``document_content`` must be ``{"type": "markdown", "markdown": str}`` (else
  ``invalid_arguments``); markdown of more than 1,048,576 characters, or a list inside a
  block quote, fails with ``canvas_creation_failed`` / ``canvas_editing_failed`` and a
  ``detail`` worded like Slack's. An edit that makes the canvas larger than that is
  ``canvas_too_large``.
- ``canvases.edit`` takes exactly one change; an unknown ``section_id`` is
  ``canvas_editing_failed``. ``rename`` takes ``title_content`` (markdown) as the new title.
  ``lock_canvas`` makes edits answer ``canvas_editing_locked`` until ``unlock_canvas``.
- Access lists (``channel_ids`` / ``user_ids``, exactly one of them, else
  ``invalid_parameters``) may be JSON arrays or comma-joined strings (slack_sdk joins them).
  A channel id must look like ``C…``, ``G…`` or ``D…`` (``channel_not_found``) and a user id
  like ``U…`` or ``W…`` (``user_not_found``).
- ``canvases`` mode ``"free"``: no standalone canvases
  (``free_teams_cannot_create_standalone_canvases``), one canvas tab per channel
  (``free_team_canvas_tab_already_exists``), standalone canvases (made before a test set
  ``canvas_mode = "free"``, a change of plan) cannot be edited;
  ``"disabled"``: ``canvas_disabled_user_team`` from every method whose docs list it.
  ``channel_canvases=False`` is a tier without channel canvases
  (``team_tier_cannot_create_channel_canvases``).
- A deleted canvas is ``canvas_deleted`` to ``canvases.sections.lookup`` and
  ``canvas_not_found`` to the others; ``files.info`` no longer finds it.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.slack.common import TEAM_DOMAIN, Json, SlackError, json_arg, random_id

MAX_MARKDOWN = 1_048_576
CANVAS_MODES = frozenset({"paid", "free", "disabled"})
ACCESS_LEVELS = frozenset({"read", "write", "owner"})
OPERATIONS = frozenset(
    {"insert_after", "insert_before", "insert_at_start", "insert_at_end", "replace", "delete"}
    | {"rename"}
)
NEED_SECTION = frozenset({"insert_after", "insert_before", "delete"})
SECTION_TYPES = {"h1": (1,), "h2": (2,), "h3": (3,), "any_header": (1, 2, 3)}
HEADING_RE = re.compile(r"^(#{1,3}) ")
QUOTED_LIST_RE = re.compile(r"^\s*>\s*([-*+]|\d+[.)])\s")
CHANNEL_RE = re.compile(r"[CGD][A-Z0-9]{2,}")
USER_RE = re.compile(r"[UW][A-Z0-9]{2,}")


@dataclass
class Section:
    id: str
    markdown: str

    @property
    def level(self) -> int:
        """1–3 for a heading section, 0 otherwise."""
        match = HEADING_RE.match(self.markdown)
        return len(match[1]) if match else 0


@dataclass
class Canvas:
    """A canvas as the fake keeps it; tests read ``title``, ``markdown`` and ``access``."""

    id: str
    title: str
    sections: list[Section]
    channel_id: str | None = None  # the channel it is tabbed in, if any
    is_channel_canvas: bool = False  # made by conversations.canvases.create
    access: dict[str, str] = field(default_factory=dict)  # channel or user id -> level
    edits: int = 0

    @property
    def markdown(self) -> str:
        return "\n".join(s.markdown for s in self.sections)


def new_section_id() -> str:
    return f"temp:C:{random_id(28)}"


def sections_of(markdown: str) -> list[Section]:
    """Markdown cut into sections, a new one at each heading."""
    parts: list[list[str]] = []
    for line in markdown.split("\n"):
        if HEADING_RE.match(line) or not parts:
            parts.append([])
        parts[-1].append(line)
    return [Section(new_section_id(), "\n".join(p)) for p in parts if any(p)]


def markdown_problem(markdown: str) -> str | None:
    """What Slack would refuse in canvas markdown, worded as its ``detail``."""
    if len(markdown) > MAX_MARKDOWN:
        return f"'content' error: document is larger than {MAX_MARKDOWN} characters"
    for n, line in enumerate(markdown.split("\n"), start=1):
        if QUOTED_LIST_RE.match(line):
            return f"'content' error: line {n}: Unsupported block type (List) within block quote"
    return None


def _id_list(value: Any) -> list[str]:
    """A list argument: a JSON array, a JSON-encoded one, or comma-joined ids."""
    if isinstance(value, str) and value.startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            raise SlackError("invalid_arguments") from None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise SlackError("invalid_arguments")


def _to_html(markdown: str) -> str:
    lines = []
    for line in markdown.split("\n"):
        match = HEADING_RE.match(line)
        if match:
            level = len(match[1])
            lines.append(f"<h{level}>{html.escape(line[match.end() :])}</h{level}>")
        elif line.strip():
            lines.append(f"<p>{html.escape(line)}</p>")
    return "".join(lines)


class CanvasFeatures:
    """Mixed into FakeSlack: canvases, stored as files."""

    team_id: str
    bot_user_id: str
    canvases: dict[str, Canvas]
    canvas_mode: str  # "paid", "free" or "disabled"
    channel_canvases: bool  # False: the team's tier has no channel canvases
    _deleted_canvases: set[str]
    _locked_canvases: set[str]
    _files: dict[str, Any]
    # provided by FakeSlack (files.py)
    _new_file: Any

    def _canvas_methods(self) -> dict[str, Any]:
        return {
            "canvases.create": self._canvases_create,
            "conversations.canvases.create": self._conversations_canvases_create,
            "canvases.edit": self._canvases_edit,
            "canvases.access.set": self._canvases_access_set,
            "canvases.access.delete": self._canvases_access_delete,
            "canvases.sections.lookup": self._canvases_sections_lookup,
            "canvases.delete": self._canvases_delete,
            "canvases.getContent": self._canvases_get_content,
        }

    # -- test hooks

    def lock_canvas(self, canvas_id: str) -> None:
        """Someone else is editing: ``canvases.edit`` answers ``canvas_editing_locked``."""
        self._locked_canvases.add(canvas_id)

    def unlock_canvas(self, canvas_id: str) -> None:
        self._locked_canvases.discard(canvas_id)

    # -- methods

    def _canvases_create(self, args: Json) -> Json:
        self._canvases_enabled()
        markdown = self._document(args, "canvas_creation_failed")
        channel = str(args.get("channel_id") or "") or None
        if self.canvas_mode == "free":
            if channel is None:
                raise SlackError("free_teams_cannot_create_standalone_canvases")
            if self._tab_in(channel):
                raise SlackError("free_team_canvas_tab_already_exists")
        canvas = self._new_canvas(str(args.get("title") or "Untitled"), markdown, channel)
        return {"canvas_id": canvas.id}

    def _conversations_canvases_create(self, args: Json) -> Json:
        self._canvases_enabled()
        channel = str(args.get("channel_id") or "")
        if not channel:
            raise SlackError("invalid_arguments")
        if not CHANNEL_RE.fullmatch(channel):
            raise SlackError("channel_not_found")
        if not self.channel_canvases:
            raise SlackError("team_tier_cannot_create_channel_canvases")
        markdown = self._document(args, "canvas_creation_failed")
        if any(c.is_channel_canvas and c.channel_id == channel for c in self.canvases.values()):
            raise SlackError("channel_canvas_already_exists")
        if self.canvas_mode == "free" and self._tab_in(channel):
            raise SlackError("free_team_canvas_tab_already_exists")
        canvas = self._new_canvas(str(args.get("title") or "Canvas"), markdown, channel)
        canvas.is_channel_canvas = True
        return {"canvas_id": canvas.id}

    def _canvases_edit(self, args: Json) -> Json:
        self._canvases_enabled()
        canvas = self._canvas_arg(args)
        changes = json_arg(args, "changes")
        if not isinstance(changes, list) or len(changes) != 1 or not isinstance(changes[0], dict):
            raise SlackError("invalid_arguments")
        change = changes[0]
        operation = change.get("operation")
        if operation not in OPERATIONS:
            raise SlackError("invalid_arguments")
        if operation in NEED_SECTION and not change.get("section_id"):
            raise SlackError("invalid_arguments")
        if self.canvas_mode == "free" and canvas.channel_id is None:
            raise SlackError("free_teams_cannot_edit_standalone_canvases")
        if canvas.id in self._locked_canvases:
            raise SlackError("canvas_editing_locked")
        self._apply_change(canvas, change)
        canvas.edits += 1
        self._sync_file(canvas)
        return {}

    def _canvases_access_set(self, args: Json) -> Json:
        self._canvases_enabled()
        canvas = self._canvas_arg(args)
        level = args.get("access_level")
        if level not in ACCESS_LEVELS:
            raise SlackError("invalid_arguments")
        for entity in self._access_targets(args):
            canvas.access[entity] = str(level)
        return {}

    def _canvases_access_delete(self, args: Json) -> Json:
        self._canvases_enabled()
        canvas = self._canvas_arg(args)
        for entity in self._access_targets(args):
            canvas.access.pop(entity, None)
        return {}

    def _canvases_sections_lookup(self, args: Json) -> Json:
        self._canvases_enabled()
        canvas_id = str(args.get("canvas_id") or "")
        if canvas_id in self._deleted_canvases:
            raise SlackError("canvas_deleted")
        canvas = self._canvas_arg(args)
        criteria = json_arg(args, "criteria")
        if not isinstance(criteria, dict):
            raise SlackError("invalid_arguments")
        levels = self._levels(criteria.get("section_types"))
        text = criteria.get("contains_text")
        if levels is None and text is None:
            raise SlackError("invalid_arguments")
        if text is not None and (not isinstance(text, str) or not text):
            raise SlackError("invalid_arguments")
        found = [
            {"id": s.id}
            for s in canvas.sections
            if (levels is None or s.level in levels) and (text is None or text in s.markdown)
        ]
        return {"sections": found}

    def _canvases_delete(self, args: Json) -> Json:
        canvas = self._canvas_arg(args)
        del self.canvases[canvas.id]
        self._files.pop(canvas.id, None)
        self._deleted_canvases.add(canvas.id)
        return {}

    def _canvases_get_content(self, args: Json) -> Json:
        canvas = self._canvas_arg(args)
        kind = args.get("content_type") or "markdown"
        if kind not in ("markdown", "html"):
            raise SlackError("invalid_arguments")
        markdown = canvas.markdown
        return {"content": markdown if kind == "markdown" else _to_html(markdown)}

    # -- helpers

    def _canvases_enabled(self) -> None:
        if self.canvas_mode == "disabled":
            raise SlackError("canvas_disabled_user_team")

    def _canvas_arg(self, args: Json) -> Canvas:
        canvas = self.canvases.get(str(args.get("canvas_id") or ""))
        if canvas is None:
            raise SlackError("canvas_not_found")
        return canvas

    def _tab_in(self, channel: str) -> bool:
        return any(c.channel_id == channel for c in self.canvases.values())

    @staticmethod
    def _document(args: Json, failure: str, key: str = "document_content") -> str:
        """The markdown of a ``document_content`` (absent: an empty canvas)."""
        content = json_arg(args, key)
        if content is None:
            return ""
        if (
            not isinstance(content, dict)
            or content.get("type") != "markdown"
            or not isinstance(content.get("markdown"), str)
        ):
            raise SlackError("invalid_arguments")
        if problem := markdown_problem(content["markdown"]):
            raise SlackError(failure, detail=problem)
        return content["markdown"]

    def _new_canvas(self, title: str, markdown: str, channel: str | None) -> Canvas:
        meta = self._new_file(
            title, title, markdown.encode(), "application/vnd.slack-docs", "canvas",
            self.bot_user_id,
        )  # fmt: skip
        canvas = Canvas(meta["id"], title, sections_of(markdown), channel)
        meta["pretty_type"] = "Canvas"
        meta["permalink"] = f"https://{TEAM_DOMAIN}.slack.com/docs/{self.team_id}/{canvas.id}"
        self.canvases[canvas.id] = canvas
        return canvas

    def _sync_file(self, canvas: Canvas) -> None:
        stored = self._files[canvas.id]
        stored.content = canvas.markdown.encode()
        stored.meta.update(title=canvas.title, name=canvas.title, size=len(stored.content))

    def _apply_change(self, canvas: Canvas, change: Json) -> None:
        operation = change["operation"]
        if operation == "rename":
            title = self._document(change, "canvas_editing_failed", "title_content")
            if not title.strip():
                raise SlackError("invalid_arguments")
            canvas.title = title
            return
        new = [] if operation == "delete" else self._change_sections(change)
        at = self._section_index(canvas, change.get("section_id"))
        match operation:
            case "insert_at_start":
                canvas.sections[:0] = new
            case "insert_at_end":
                canvas.sections += new
            case "insert_before":
                canvas.sections[at:at] = new
            case "insert_after":
                canvas.sections[at + 1 : at + 1] = new
            case "replace" if at is None:
                canvas.sections = new
            case "replace" | "delete":
                canvas.sections[at : at + 1] = new
        if len(canvas.markdown) > MAX_MARKDOWN:
            raise SlackError("canvas_too_large")

    def _change_sections(self, change: Json) -> list[Section]:
        if "document_content" not in change:
            raise SlackError("invalid_arguments")
        return sections_of(self._document(change, "canvas_editing_failed"))

    @staticmethod
    def _section_index(canvas: Canvas, section_id: Any) -> Any:
        if not section_id:
            return None
        for i, section in enumerate(canvas.sections):
            if section.id == section_id:
                return i
        raise SlackError("canvas_editing_failed", detail=f"section {section_id} not found")

    @staticmethod
    def _access_targets(args: Json) -> list[str]:
        channels, users = args.get("channel_ids"), args.get("user_ids")
        if (channels is None) == (users is None):
            raise SlackError("invalid_parameters")
        if channels is not None:
            ids = _id_list(channels)
            if not ids or not all(CHANNEL_RE.fullmatch(c) for c in ids):
                raise SlackError("channel_not_found")
            return ids
        ids = _id_list(users)
        if not ids or not all(USER_RE.fullmatch(u) for u in ids):
            raise SlackError("user_not_found")
        return ids

    @staticmethod
    def _levels(section_types: Any) -> tuple[int, ...] | None:
        if section_types is None:
            return None
        if (
            not isinstance(section_types, list)
            or not 1 <= len(section_types) <= 3
            or any(t not in SECTION_TYPES for t in section_types)
        ):
            raise SlackError("invalid_arguments")
        return tuple(level for t in section_types for level in SECTION_TYPES[t])
