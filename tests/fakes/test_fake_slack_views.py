"""views.open in the fake Slack, through the real AsyncWebClient: trigger ids good once and
for 3 seconds after the interaction that carried them, and the modal view object's limits
(title, close and submit of 24 characters, 100 blocks checked as Block Kit, metadata)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack
from tests.slack_clients import api_error, socket_mode

CHANNEL = "C0CHAN001"


def _plain(text: str) -> dict[str, str]:
    return {"type": "plain_text", "text": text}


pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


def modal(blocks: int = 1, **fields: Any) -> dict[str, Any]:
    text = {"type": "section", "text": {"type": "mrkdwn", "text": "hello"}}
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Show work"},
        "blocks": [text] * blocks,
        **fields,
    }


async def error_of(client: AsyncWebClient, view: Any, trigger: str | None) -> str:
    return (await api_error(client.views_open(trigger_id=trigger, view=view))).response["error"]


async def test_a_clicks_trigger_opens_a_modal_once(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    posted = await client.chat_postMessage(
        channel=CHANNEL,
        text="answer",
        blocks=[{"type": "actions", "elements": [{"type": "button", "action_id": "go",
                 "value": "v", "text": {"type": "plain_text", "text": "Go"}}]}],
    )  # fmt: skip
    async with socket_mode(slack) as (_, received):
        await slack.click_button(slack.find_message(CHANNEL, posted["ts"]), "go")
        await slack.wait_for(lambda: received)
    trigger = received[0].payload["trigger_id"]
    opened = await client.views_open(trigger_id=trigger, view=modal(close=_plain("Close")))
    again = await error_of(client, modal(), trigger)

    assert opened["view"]["type"] == "modal" and opened["view"]["id"].startswith("V")
    assert opened["view"]["close"]["text"] == "Close"
    assert [v["id"] for v in slack.views_opened] == [opened["view"]["id"]]
    assert again == "exchanged_trigger_id"


async def test_triggers_the_fake_never_issued_or_too_old_are_refused(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    made_up = await error_of(client, modal(), "12345.98765.abcd2358fdea")
    malformed = await error_of(client, modal(), "not a trigger")
    stale = await error_of(client, modal(), slack.issue_trigger(age_s=3.5))
    missing = await api_error(client.views_open(view=modal()))
    fresh = await client.views_open(trigger_id=slack.issue_trigger(age_s=2.0), view=modal())

    assert (made_up, malformed, stale) == (
        "invalid_trigger_id",
        "invalid_trigger_id",
        "expired_trigger_id",
    )
    assert missing.response["error"] == "invalid_arguments"
    assert "trigger_id" in str(missing.response["response_metadata"])
    assert fresh["ok"]


BAD_VIEWS = [
    (modal(type="home"), "/view/type"),
    ({k: v for k, v in modal().items() if k != "title"}, "/view/title"),
    (modal(title=_plain("x" * 25)), "/view/title/text"),
    (modal(title={"type": "mrkdwn", "text": "Show work"}), "/view/title/type"),
    (modal(close=_plain("x" * 25)), "/view/close/text"),
    (modal(submit=_plain("x" * 25)), "/view/submit/text"),
    (modal(private_metadata="x" * 3001), "/view/private_metadata"),
    (modal(callback_id="x" * 256), "/view/callback_id"),
    ({k: v for k, v in modal().items() if k != "blocks"}, "/view/blocks"),
    (modal(blocks=101), "/view/blocks"),
    (modal(blocks=0) | {"blocks": [{"type": "section", "text": _plain("x" * 3001)}]},
     "/view/blocks/0/text/text"),
    (modal(blocks=0) | {"blocks": [{"type": "actions", "elements": [{"type": "button",
     "action_id": "a", "text": {"type": "mrkdwn", "text": "Go"}}]}]},
     "/view/blocks/0/elements/0/text/type"),
]  # fmt: skip


@pytest.mark.parametrize(("view", "pointer"), BAD_VIEWS)
async def test_a_view_outside_the_modal_rules_is_invalid_arguments(
    slack: FakeSlack, client: AsyncWebClient, view: dict[str, Any], pointer: str
) -> None:
    trigger = slack.issue_trigger()
    err = await api_error(client.views_open(trigger_id=trigger, view=view))
    fine = await client.views_open(trigger_id=trigger, view=modal())  # not used up

    assert err.response["error"] == "invalid_arguments"
    messages = err.response["response_metadata"]["messages"]
    assert any(f"[json-pointer:{pointer}]" in m for m in messages), messages
    assert fine["ok"] and len(slack.views_opened) == 1


async def test_a_modal_holds_100_blocks_and_at_most_250_kb(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    full = await client.views_open(trigger_id=slack.issue_trigger(), view=modal(blocks=100))
    big = [{"type": "section", "text": _plain("x" * 2900)}] * 90
    too_large = await error_of(client, modal(blocks=0) | {"blocks": big}, slack.issue_trigger())

    assert full["ok"] and len(full["view"]["blocks"]) == 100
    assert too_large == "view_too_large"


async def test_a_view_sent_as_a_json_string_in_a_form(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    """The method page: `view` is a JSON-encoded string (the SDK sends a JSON body)."""
    opened = await client.api_call(
        "views.open", data={"trigger_id": slack.issue_trigger(), "view": json.dumps(modal())}
    )
    broken = await api_error(
        client.api_call("views.open", data={"trigger_id": slack.issue_trigger(), "view": "{"})
    )

    assert opened["ok"] and opened["view"]["title"]["text"] == "Show work"
    assert broken.response["error"] == "invalid_arguments"
