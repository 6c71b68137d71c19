"""Block Kit as the fake Slack checks it: every block and element the bot sends
(slack-platform.md §6.2, §7.5; the limits slack_sdk's block models validate).

Problems are worded like Slack's ``response_metadata.messages``. Where neither the doc nor
the SDK gives a rule, the fake takes Slack's published Block Kit reference: a button's text
is ``plain_text``; an ``actions`` block holds 1 to 25 elements and a ``context`` block 1 to
10, a ``context_actions`` block 1 to 5 (``feedback_buttons`` or ``icon_button``); action_ids
are unique within a block and block_ids within a message (the blocks of a streamed message
count together). Blocks of a type the fake does not know pass unchecked, so the checks stay
about what is known (``rich_text`` too, so its ``canvas`` elements pass). The data blocks
(``table``, ``data_table``, ``data_visualization``) and their per-message rules are in
surfaces.py; ``table`` blocks may also sit in ``attachments[].blocks``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tests.fakes.slack.surfaces import (
    DEFAULT_RULES,
    SURFACE_BLOCKS,
    Located,
    SurfaceRules,
    message_problems,
)

MAX_BLOCKS = 50
MAX_BLOCK_ID = 255
MAX_ACTION_ID = 255
MAX_SECTION_TEXT = 3_000
MAX_FIELD_TEXT = 2_000
MAX_FIELDS = 10
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS_ELEMENTS = 25
MAX_CONTEXT_ACTIONS = 5
MAX_MARKDOWN = 12_000
MAX_BUTTON_TEXT = 75  # also a button's accessibility_label
MAX_BUTTON_VALUE = 2_000
MAX_BUTTON_URL = 3_000
BUTTON_STYLES = frozenset({"primary", "danger"})
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})
ACTION_ELEMENTS = frozenset(
    {
        "button",
        "checkboxes",
        "datepicker",
        "datetimepicker",
        "multi_static_select",
        "multi_users_select",
        "overflow",
        "radio_buttons",
        "static_select",
        "timepicker",
        "users_select",
        "workflow_button",
    }
)

Bad = Callable[[str, str], None]  # (json pointer under /blocks, what is wrong)
Json = dict[str, Any]


def block_problems(
    blocks: list[Any],
    taken_ids: frozenset[str] = frozenset(),
    rules: SurfaceRules = DEFAULT_RULES,
    attachments: Sequence[Any] = (),
    *,
    max_blocks: int = MAX_BLOCKS,
) -> list[str]:
    """Every Block Kit violation in `blocks` and the blocks of `attachments`; `taken_ids` are
    block_ids already in the message (an earlier part of a stream). `max_blocks`: a
    message's 50, or a modal's 100 (views.py)."""
    problems: list[str] = []

    def bad_under(root: str) -> Bad:
        return lambda path, what: problems.append(f"[ERROR] {what} [json-pointer:{root}{path}]")

    seen = set(taken_ids)
    located = _check_blocks(blocks, seen, rules, bad_under("/blocks"), "/blocks", max_blocks)
    for j, attachment in enumerate(attachments):
        inner = attachment.get("blocks") if isinstance(attachment, dict) else None
        if isinstance(inner, list):
            root = f"/attachments/{j}/blocks"
            located += _check_blocks(inner, seen, rules, bad_under(root), root, max_blocks)
    message_problems(located, rules, bad_under(""))
    return problems


def _check_blocks(
    blocks: list[Any], seen: set[str], rules: SurfaceRules, bad: Bad, root: str, max_blocks: int
) -> Located:
    """Check each block; answer the well-formed ones with their full json pointers."""
    if len(blocks) > max_blocks:
        bad("", f"no more than {max_blocks} items allowed")
    located: Located = []
    for i, block in enumerate(blocks):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            bad(f"/{i}", "missing required field: type")
            continue
        _block_id(f"/{i}", block, seen, bad)
        kind = block["type"]
        if refusal := rules.refusal(kind, in_attachment=root != "/blocks"):
            bad(f"/{i}/type", refusal)
            continue
        if check := BLOCKS.get(kind):
            check(f"/{i}", block, bad)
        elif surface := SURFACE_BLOCKS.get(kind):
            surface(f"/{i}", block, bad, rules)
        located.append((f"{root}/{i}", block))
    return located


def _block_id(path: str, block: Json, seen: set[str], bad: Bad) -> None:
    block_id = block.get("block_id")
    if block_id is None:
        return
    if not isinstance(block_id, str) or not block_id:
        bad(f"{path}/block_id", "must be a non-empty string")
        return
    if len(block_id) > MAX_BLOCK_ID:
        bad(f"{path}/block_id", f"must be less than {MAX_BLOCK_ID + 1} characters")
    if block_id in seen:
        bad(f"{path}/block_id", f"duplicate block_id: {block_id}")
    seen.add(block_id)


# -- composition objects


def _text(path: str, obj: Any, bad: Bad, *, limit: int, plain: bool = False) -> None:
    """A text object: plain_text (or mrkdwn where allowed) with a string of 1..limit."""
    if not isinstance(obj, dict):
        bad(path, "must be a text object")
        return
    kinds = {"plain_text"} if plain else TEXT_TYPES
    if obj.get("type") not in kinds:
        bad(f"{path}/type", f"must be one of {sorted(kinds)}")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        bad(f"{path}/text", "must be a non-empty string")
    elif len(text) > limit:
        bad(f"{path}/text", f"must be less than {limit + 1} characters")


def _string(path: str, value: Any, bad: Bad, limit: int, *, required: bool = False) -> None:
    if value is None:
        if required:
            bad(path, "missing required field")
        return
    if not isinstance(value, str) or not value:
        bad(path, "must be a non-empty string")
    elif len(value) > limit:
        bad(path, f"must be less than {limit + 1} characters")


def _elements(path: str, block: Json, bad: Bad, limit: int) -> list[Any]:
    elements = block.get("elements")
    if not isinstance(elements, list) or not elements:
        bad(f"{path}/elements", "must provide at least 1 item")
        return []
    if len(elements) > limit:
        bad(f"{path}/elements", f"no more than {limit} items allowed")
    return elements


def _unique_action_ids(path: str, elements: list[Any], bad: Bad) -> None:
    ids = [e.get("action_id") for e in elements if isinstance(e, dict) and e.get("action_id")]
    for action_id in {a for a in ids if ids.count(a) > 1}:
        bad(f"{path}/elements", f"duplicate action_id: {action_id}")


# -- elements


def _button(path: str, element: Json, bad: Bad) -> None:
    _text(f"{path}/text", element.get("text"), bad, limit=MAX_BUTTON_TEXT, plain=True)
    _string(f"{path}/action_id", element.get("action_id"), bad, MAX_ACTION_ID)
    _string(f"{path}/value", element.get("value"), bad, MAX_BUTTON_VALUE)
    _string(f"{path}/url", element.get("url"), bad, MAX_BUTTON_URL)
    label = element.get("accessibility_label")
    _string(f"{path}/accessibility_label", label, bad, MAX_BUTTON_TEXT)
    if "style" in element and element["style"] not in BUTTON_STYLES:
        bad(f"{path}/style", f"must be one of {sorted(BUTTON_STYLES)}")


def _feedback_buttons(path: str, element: Json, bad: Bad) -> None:
    _string(f"{path}/action_id", element.get("action_id"), bad, MAX_ACTION_ID)
    for side in ("positive_button", "negative_button"):
        button = element.get(side)
        if not isinstance(button, dict):
            bad(f"{path}/{side}", "missing required field")
            continue
        _text(f"{path}/{side}/text", button.get("text"), bad, limit=MAX_BUTTON_TEXT, plain=True)
        _string(f"{path}/{side}/value", button.get("value"), bad, MAX_BUTTON_VALUE, required=True)
        label = button.get("accessibility_label")
        _string(f"{path}/{side}/accessibility_label", label, bad, MAX_BUTTON_TEXT)


def _icon_button(path: str, element: Json, bad: Bad) -> None:
    _text(f"{path}/text", element.get("text"), bad, limit=MAX_BUTTON_TEXT, plain=True)
    _string(f"{path}/icon", element.get("icon"), bad, MAX_BUTTON_TEXT, required=True)
    _string(f"{path}/action_id", element.get("action_id"), bad, MAX_ACTION_ID)
    _string(f"{path}/value", element.get("value"), bad, MAX_BUTTON_VALUE)


def _context_element(path: str, element: Any, bad: Bad) -> None:
    kind = element.get("type") if isinstance(element, dict) else None
    if kind in TEXT_TYPES:
        _text(path, element, bad, limit=MAX_SECTION_TEXT)
    elif kind == "image":
        source = element.get("image_url") or element.get("slack_file")
        if not element.get("alt_text") or not source:
            bad(path, "an image needs alt_text and image_url or slack_file")
    else:
        bad(f"{path}/type", "must be one of ['image', 'mrkdwn', 'plain_text']")


# -- blocks


def _section(path: str, block: Json, bad: Bad) -> None:
    if "text" not in block and "fields" not in block:
        bad(path, "must provide either text or fields")
    if "text" in block:
        _text(f"{path}/text", block["text"], bad, limit=MAX_SECTION_TEXT)
    fields = block.get("fields") or []
    if len(fields) > MAX_FIELDS:
        bad(f"{path}/fields", f"no more than {MAX_FIELDS} items allowed")
    for j, item in enumerate(fields):
        _text(f"{path}/fields/{j}", item, bad, limit=MAX_FIELD_TEXT)
    accessory = block.get("accessory")
    if isinstance(accessory, dict) and accessory.get("type") == "button":
        _button(f"{path}/accessory", accessory, bad)


def _header(path: str, block: Json, bad: Bad) -> None:
    _text(f"{path}/text", block.get("text"), bad, limit=MAX_HEADER_TEXT, plain=True)


def _context(path: str, block: Json, bad: Bad) -> None:
    for j, element in enumerate(_elements(path, block, bad, MAX_CONTEXT_ELEMENTS)):
        _context_element(f"{path}/elements/{j}", element, bad)


def _actions(path: str, block: Json, bad: Bad) -> None:
    elements = _elements(path, block, bad, MAX_ACTIONS_ELEMENTS)
    for j, element in enumerate(elements):
        kind = element.get("type") if isinstance(element, dict) else None
        if kind not in ACTION_ELEMENTS:
            bad(f"{path}/elements/{j}/type", "must be an interactive element")
        elif kind == "button":
            _button(f"{path}/elements/{j}", element, bad)
    _unique_action_ids(path, elements, bad)


def _context_actions(path: str, block: Json, bad: Bad) -> None:
    elements = _elements(path, block, bad, MAX_CONTEXT_ACTIONS)
    for j, element in enumerate(elements):
        kind = element.get("type") if isinstance(element, dict) else None
        if kind == "feedback_buttons":
            _feedback_buttons(f"{path}/elements/{j}", element, bad)
        elif kind == "icon_button":
            _icon_button(f"{path}/elements/{j}", element, bad)
        else:
            bad(f"{path}/elements/{j}/type", "must be one of ['feedback_buttons', 'icon_button']")
    _unique_action_ids(path, elements, bad)


def _markdown(path: str, block: Json, bad: Bad) -> None:
    text = block.get("text")
    if not isinstance(text, str) or not text:
        bad(f"{path}/text", "missing required field: text")
    elif len(text) > MAX_MARKDOWN:
        bad(f"{path}/text", f"must be less than {MAX_MARKDOWN + 1} characters")


BLOCKS: dict[str, Callable[[str, Json, Bad], None]] = {
    "section": _section,
    "header": _header,
    "context": _context,
    "actions": _actions,
    "context_actions": _context_actions,
    "markdown": _markdown,
}
