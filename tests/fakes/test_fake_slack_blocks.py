"""The fake Slack's Block Kit checks (fakes/slack/kit.py), through the real slack_sdk client: each
rule Slack keeps is refused as Slack refuses it, and the bot's own blocks pass them all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import Block
from slack_sdk.web.async_client import AsyncWebClient

from bot.run_events import RunFinished, ToolCallFinished, ToolCallStarted
from bot.slack.render import block_kit
from bot.usage import Usage
from tests.fakes.slack import FakeSlack
from tests.fakes.slack.kit import block_problems

CHANNEL = "C0CHAN001"
pytestmark = pytest.mark.usefixtures("no_proxy")


def button(**fields: Any) -> dict[str, Any]:
    text = {"type": "plain_text", "text": "Go"}
    return {"type": "button", "action_id": "go", "text": text, **fields}


def actions(*elements: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"type": "actions", "elements": list(elements), **fields}


def feedback(**side: Any) -> dict[str, Any]:
    good = {"text": {"type": "plain_text", "text": "Good"}, "value": "good", **side}
    bad = {"text": {"type": "plain_text", "text": "Bad"}, "value": "bad"}
    element = {"type": "feedback_buttons", "action_id": "fb", "positive_button": good}
    return {"type": "context_actions", "elements": [{**element, "negative_button": bad}]}


REFUSED = {
    "button text mrkdwn": [actions(button(text={"type": "mrkdwn", "text": "Go"}))],
    "button text 76": [actions(button(text={"type": "plain_text", "text": "x" * 76}))],
    "button text empty": [actions(button(text={"type": "plain_text", "text": ""}))],
    "action_id 256": [actions(button(action_id="a" * 256))],
    "value 2001": [actions(button(value="v" * 2001))],
    "url 3001": [actions(button(url="https://x/" + "u" * 2991))],
    "style": [actions(button(style="warning"))],
    "label 76": [actions(button(accessibility_label="l" * 76))],
    "actions 26": [actions(*[button(action_id=f"a{i}") for i in range(26)])],
    "actions empty": [actions()],
    "actions not interactive": [actions({"type": "mrkdwn", "text": "x"})],
    "duplicate action_id": [actions(button(), button())],
    "feedback no negative": [
        {"type": "context_actions", "elements": [{"type": "feedback_buttons", "action_id": "f"}]}
    ],
    "feedback text 76": [feedback(text={"type": "plain_text", "text": "x" * 76})],
    "feedback no value": [feedback(value=None)],
    "feedback value 2001": [feedback(value="v" * 2001)],
    "context_actions 6": [{"type": "context_actions", "elements": feedback()["elements"] * 6}],
    "context_actions button": [{"type": "context_actions", "elements": [button()]}],
    "context 11": [{"type": "context", "elements": [{"type": "mrkdwn", "text": "x"}] * 11}],
    "context empty": [{"type": "context", "elements": []}],
    "context button": [{"type": "context", "elements": [button()]}],
    "context image no alt": [
        {"type": "context", "elements": [{"type": "image", "image_url": "u"}]}
    ],
    "markdown empty": [{"type": "markdown", "text": ""}],
    "markdown 12001": [{"type": "markdown", "text": "x" * 12_001}],
    "section text type": [{"type": "section", "text": {"type": "html", "text": "x"}}],
    "header mrkdwn": [{"type": "header", "text": {"type": "mrkdwn", "text": "x"}}],
    "block_id 256": [{"type": "divider", "block_id": "b" * 256}],
    "block_id twice": [{"type": "divider", "block_id": "b"}, {"type": "divider", "block_id": "b"}],
    "block_id empty": [{"type": "divider", "block_id": ""}],
}


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


@pytest.mark.parametrize("blocks", REFUSED.values(), ids=REFUSED.keys())
async def test_block_kit_rules_are_refused_with_invalid_blocks(
    slack: FakeSlack, blocks: list[dict[str, Any]]
) -> None:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    with pytest.raises(SlackApiError) as err:
        await client.chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)
    assert err.value.response["error"] == "invalid_blocks"
    [problem, *_] = err.value.response["response_metadata"]["messages"]
    assert problem.startswith("[ERROR]") and "json-pointer:/blocks/" in problem


async def test_blocks_at_the_limits_are_taken(slack: FakeSlack) -> None:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    full = button(
        text={"type": "plain_text", "text": "x" * 75},
        action_id="a" * 255,
        value="v" * 2000,
        style="danger",
        accessibility_label="l" * 75,
    )
    blocks = [
        actions(full, *[button(action_id=f"a{i}") for i in range(24)], block_id="b" * 255),
        feedback(accessibility_label="Good answer"),
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "x"}] * 10},
        {"type": "markdown", "text": "x" * 12_000},
    ]
    posted = await client.chat_postMessage(channel=CHANNEL, text="x", blocks=blocks)
    assert len(slack.find_message(CHANNEL, posted["ts"])["blocks"]) == 4


STARTED = ToolCallStarted("toolu_1", "run_code", "python", "x = 1\n" * 2000)
ENDED = ToolCallFinished(
    "toolu_1", "run_code", "error", 1, 2.5, "Traceback\n" * 500, "python", STARTED.code
)
ESCAPED = ToolCallStarted("toolu_2", "run_code", "python", "if a < b & c > d:\n" * 500)
DONE = RunFinished("a" * 30_000, turns=3, usage=Usage(), cost_usd=0.5, stop="end_turn")


def bot_blocks() -> list[list[dict[str, Any]]]:
    """Every kind of body the bot's renderer makes, at its largest."""
    return [
        block_kit.status("Working " * 1000, run_id="r" * 200),
        block_kit.tool_started(1, STARTED)[1],
        block_kit.tool_finished(1, ENDED)[1],
        block_kit.tool_started(2, ESCAPED)[1],  # escaping makes it longer
        block_kit.continue_button(
            "note " * 1000, "T0FAKE001:C0CHAN001:1767225600.000100", 9.99, "run:" + "r" * 12
        ),
        [block_kit.context(block_kit.footer(DONE, 12.0)), block_kit.feedback("r" * 200)],
        [block_kit.stop_button("r" * 200)],
        *(blocks for _, blocks in block_kit.answer_messages(DONE, 12.0)),
        *(blocks for _, blocks in block_kit.answer_messages(DONE, 12.0, "r" * 200)),
        block_kit.answer_end(DONE, 12.0, "r" * 200, worked=True),
    ]


@pytest.mark.parametrize("blocks", bot_blocks())
def test_the_bots_blocks_pass_the_fake_and_slack_sdk(blocks: list[dict[str, Any]]) -> None:
    assert block_problems(blocks) == []
    for block in blocks:
        model = Block.parse(block)
        assert model is not None
        model.validate_json()  # slack_sdk's own limits
