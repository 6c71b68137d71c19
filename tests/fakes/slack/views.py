"""The fake Slack's modals: ``views.open`` as Slack documents it, and the trigger ids the
interactions it sends carry.

Sources (docs.slack.dev): the method page, reference/methods/views.open (``view`` required,
a JSON-encoded string or a JSON body; ``trigger_id`` or ``interactivity_pointer``; errors
``invalid_trigger_id`` for a malformed one, ``expired_trigger_id``, ``exchanged_trigger_id``
for one used before, ``view_too_large`` over 250 kB, ``invalid_arguments``); the modal view
object, reference/views/modal-views (``type`` "modal"; ``title`` plain_text of at most 24
characters; ``blocks`` at most 100; ``close`` and ``submit`` plain_text of at most 24;
``private_metadata`` at most 3,000 characters; ``callback_id`` and ``external_id`` at most
255); Bolt's "Opening modals" (a trigger is good for 3 seconds after it is received).

Where the sources are vague the fake is strict: a trigger id is valid only if the fake
issued it (with an interaction or a slash command) less than ``trigger_lifetime_s`` ago;
one the fake never issued is ``invalid_trigger_id`` as a malformed one is. A call without
either argument, or with a view that breaks the modal rules, is ``invalid_arguments`` with
the problems in ``response_metadata.messages`` (worded as kit.py words Block Kit's). Only
an open that succeeds uses its trigger up. Blocks are checked by kit.py's
``block_problems``, with the modal's 100 blocks instead of a message's 50.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import string
import time
from typing import Any

from tests.fakes.slack.common import Json, SlackError, json_arg, random_id
from tests.fakes.slack.kit import block_problems

TRIGGER_LIFETIME_S = 3.0
TRIGGER_FORMAT = re.compile(r"\d+\.\d+\.[0-9a-f]+")  # "132456.7890123.abcdef"
MAX_VIEW_BYTES = 250 * 1024
MAX_MODAL_BLOCKS = 100
MAX_MODAL_BUTTON_TEXT = 24  # title, close and submit
MAX_PRIVATE_METADATA = 3_000
MAX_CALLBACK_ID = 255
MAX_EXTERNAL_ID = 255


class ViewFeatures:
    """Mixed into FakeSlack: trigger ids and ``views.open``."""

    team_id: str
    app_id: str
    bot_id: str
    trigger_lifetime_s: float
    views_opened: list[Json]  # each opened view as Slack answered it
    _triggers: dict[str, float]  # trigger id -> when issued (monotonic)
    _exchanged: set[str]

    def _view_methods(self) -> dict[str, Any]:
        return {"views.open": self._views_open}

    def issue_trigger(self, *, age_s: float = 0.0) -> str:
        """A trigger id as an interaction carries it; `age_s`: issued that long ago."""
        trigger = f"{int(time.time())}.{random_id(8, string.digits)}.{secrets.token_hex(16)}"
        self._triggers[trigger] = time.monotonic() - age_s
        return trigger

    def _views_open(self, args: Json) -> Json:
        view = json_arg(args, "view")
        if not isinstance(view, dict):
            raise _invalid("missing required field: view", "/view")
        if len(json.dumps(view)) > MAX_VIEW_BYTES:
            raise SlackError("view_too_large")
        trigger = self._trigger(args)
        if problems := modal_problems(view):
            raise SlackError("invalid_arguments", response_metadata={"messages": problems})
        self._exchanged.add(trigger)
        opened = self._opened(view)
        self.views_opened.append(opened)
        return {"view": copy.deepcopy(opened)}

    def _trigger(self, args: Json) -> str:
        trigger = str(args.get("trigger_id") or "")
        if not trigger:
            if args.get("interactivity_pointer"):  # workflow steps only: not the bot's
                raise SlackError("invalid_trigger_id")
            raise _invalid("missing required field: trigger_id", "/trigger_id")
        issued = self._triggers.get(trigger)
        if not TRIGGER_FORMAT.fullmatch(trigger) or issued is None:
            raise SlackError("invalid_trigger_id")
        if trigger in self._exchanged:
            raise SlackError("exchanged_trigger_id")
        if time.monotonic() - issued > self.trigger_lifetime_s:
            raise SlackError("expired_trigger_id")
        return trigger

    def _opened(self, view: Json) -> Json:
        view_id = f"V{random_id(10)}"
        defaults = {"private_metadata": "", "callback_id": "", "external_id": ""}
        return {
            **defaults,
            **copy.deepcopy(view),
            "id": view_id,
            "team_id": self.team_id,
            "state": {"values": {}},
            "hash": f"{time.time():.6f}.{secrets.token_hex(4)}",
            "clear_on_close": bool(view.get("clear_on_close")),
            "notify_on_close": bool(view.get("notify_on_close")),
            "root_view_id": view_id,
            "previous_view_id": None,
            "app_id": self.app_id,
            "bot_id": self.bot_id,
        }


def modal_problems(view: Json) -> list[str]:
    """Every way `view` breaks the modal view object's rules, its blocks included."""
    problems: list[str] = []

    def bad(path: str, what: str) -> None:
        problems.append(f"[ERROR] {what} [json-pointer:/view{path}]")

    if view.get("type") != "modal":
        bad("/type", "must be one of ['modal']")
    _label(view, "title", bad, required=True)
    _label(view, "close", bad)
    _label(view, "submit", bad)
    for key, limit in (
        ("private_metadata", MAX_PRIVATE_METADATA),
        ("callback_id", MAX_CALLBACK_ID),
        ("external_id", MAX_EXTERNAL_ID),
    ):
        value = view.get(key)
        if value is not None and not isinstance(value, str):
            bad(f"/{key}", "must be a string")
        elif value and len(value) > limit:
            bad(f"/{key}", f"must be less than {limit + 1} characters")
    blocks = view.get("blocks")
    if not isinstance(blocks, list):
        bad("/blocks", "missing required field: blocks")
        return problems
    if any(b.get("type") == "input" for b in blocks if isinstance(b, dict)) and not view.get(
        "submit"
    ):
        bad("/submit", "a view with input blocks needs submit")
    found = block_problems(blocks, max_blocks=MAX_MODAL_BLOCKS)
    return problems + [p.replace("[json-pointer:/", "[json-pointer:/view/") for p in found]


def _label(view: Json, key: str, bad: Any, *, required: bool = False) -> None:
    """The title, close or submit text: plain_text of 1 to 24 characters."""
    label = view.get(key)
    if label is None:
        if required:
            bad(f"/{key}", f"missing required field: {key}")
        return
    if not isinstance(label, dict) or label.get("type") != "plain_text":
        bad(f"/{key}/type", "must be one of ['plain_text']")
        return
    text = label.get("text")
    if not isinstance(text, str) or not text:
        bad(f"/{key}/text", "must be a non-empty string")
    elif len(text) > MAX_MODAL_BUTTON_TEXT:
        bad(f"/{key}/text", f"must be less than {MAX_MODAL_BUTTON_TEXT + 1} characters")


def _invalid(what: str, path: str) -> SlackError:
    messages = [f"[ERROR] {what} [json-pointer:{path}]"]
    return SlackError("invalid_arguments", response_metadata={"messages": messages})
