"""What goes out to Slack, end to end: no post can notify a crowd (`<!channel>`, `<!here>`,
`<!everyone>`, user groups), none leaves link previews on, and a configured secret is
caught even where a long answer is cut into several messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.scrub import REDACTED, Scrubber
from bot.slack.render.markdown_split import PIECE_MAX
from bot.slack.web.outgoing import Outgoing
from tests.fakes.anthropic import ModelRequest, Reply, text, tool_use
from tests.fakes.slack import FakeSlack
from tests.fakes.slack.outgoing import broadcasts
from tests.slack_harness import CHANNEL, Harness, running_bot

CROWD = "<!channel> <!here|here> <!everyone> <!subteam^S0TEAM1|@data-team> @here @channel"
LINK = "https://collector.example/?rows=secret-rows"


def hostile(req: ModelRequest) -> Reply:
    """A model a hostile file has steered: crowd mentions in its code, its tool's output
    (a step's title, details and output) and its answer, and a link to fetch."""
    if not req.tool_results():
        code = f"echo '{CROWD}'  # {CROWD}"
        return Reply([tool_use("run_code", {"language": "bash", "code": code})])
    return Reply([text(f"# Findings {CROWD}\n\nSee {LINK} and ![chart]({LINK}) {CROWD}")])


def sent(h: Harness) -> str:
    return json.dumps([c.args for c in h.slack.calls], default=str)


def test_inert_leaves_no_crowd_mention_in_any_field() -> None:
    blocks = [
        {"type": "markdown", "text": CROWD},
        {"type": "section", "text": {"type": "mrkdwn", "text": CROWD}},
        {"type": "context", "elements": [{"type": "plain_text", "text": CROWD}]},
        {
            "type": "rich_text",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": [
                        {"type": "broadcast", "range": "channel"},
                        {"type": "usergroup", "usergroup_id": "S0TEAM1"},
                        {"type": "text", "text": CROWD},
                    ],
                }
            ],
        },
    ]
    chunks = [{"type": "task_update", "id": "t", "title": CROWD, "details": CROWD}]
    clean = Outgoing(Scrubber([]))
    assert broadcasts([blocks, chunks, CROWD]) != []  # the detector sees them all
    assert broadcasts(clean.data([blocks, chunks])) == []
    assert broadcasts(clean.text(CROWD + " <!channel")) == []
    assert clean.text("a <@U0HUMAN01> b, mail@here.com") == "a <@U0HUMAN01> b, mail@here.com"


@pytest.mark.parametrize("ui", ["agent", "classic"])
async def test_no_post_notifies_a_crowd_or_unfurls(sandbox_root: Path, monkeypatch, ui) -> None:
    only = {"slack_ui": ui, "allowed_users": "U0HUMAN01"}
    async with running_bot("local", hostile, sandbox_root, monkeypatch, **only) as h:
        await h.slack.post_user_message(CHANNEL, "hi", mention=True, user="U0STRANGER")
        bare = await h.slack.post_user_message(CHANNEL, "", mention=True)  # a plain post
        await h.wait_for_text(bare["ts"], "What would you like me to find out?")
        csv = h.slack.add_file("<!channel> sales.csv", b"region,total\nnorth,3\n")
        question = f"sum the totals {CROWD}"
        message = await h.slack.post_user_message(CHANNEL, question, files=[csv], mention=True)
        await h.wait_for_text(message["ts"], "Findings")
        dm = await h.slack.post_user_message("D0DIRECT1", f"hello {CROWD}")  # titled after it
        await h.slack.wait_for(lambda: "Findings" in str(h.slack.thread("D0DIRECT1", dm["ts"])))
        traffic = sent(h)

    assert "&lt;!channel&gt;" in traffic and LINK in traffic  # they were posted, made inert
    assert h.slack.outgoing.broadcasts == []
    posts = ("chat.postMessage", "chat.postEphemeral", *(["chat.update"] * (ui == "classic")))
    assert all(h.slack.calls_to(method) for method in posts)  # each kind of post was made
    assert h.slack.outgoing.unfurled == []


async def test_the_analyze_announcement_repeats_no_crowd_mention(
    sandbox_root: Path, monkeypatch
) -> None:
    def answer(req: ModelRequest) -> Reply:
        return Reply([text("done")])

    url = "https://140.82.112.3/acme/data"  # a public address: no name to look up
    async with running_bot("buddy", answer, sandbox_root, monkeypatch) as h:
        envelope = await h.slack.slash_command("/analyze", f"{url} what is new? {CROWD}")
        await h.slack.wait_for_ack(envelope)
        await h.slack.wait_for(lambda: "asked me to analyze" in sent(h))

    assert "<@U0HUMAN01> asked me to analyze" in sent(h)  # the asker is still named
    assert h.slack.outgoing.broadcasts == []


@pytest.mark.parametrize("ui", ["agent", "classic"])
async def test_a_secret_across_a_cut_in_a_long_answer_is_caught(
    sandbox_root: Path, monkeypatch, ui
) -> None:
    secret = "sk-ant-test-secret"  # the configured ANTHROPIC_API_KEY
    cut = PIECE_MAX  # where a long paragraph is cut, in both styles
    answer = "a" * (cut - len(secret) // 2) + secret + "b" * 500  # one paragraph

    def script(req: ModelRequest) -> Reply:
        if not req.tool_results():  # a step first, so the agent style streams its answer
            return Reply([tool_use("run_code", {"language": "bash", "code": "echo hi"})])
        return Reply([text(answer)])

    async with running_bot("local", script, sandbox_root, monkeypatch, slack_ui=ui) as h:
        message = await h.slack.post_user_message(CHANNEL, "a long one", mention=True)
        await h.wait_for_text(message["ts"], "bbbb")
        traffic = sent(h)

    assert REDACTED[:-1] in traffic  # (the cut may fall inside the marker)
    if ui == "agent":
        assert "a" * 100 in str(h.slack.calls_to("chat.stopStream")[0].args)  # streamed
    for piece in (secret[:8], secret[-8:], secret[4:12]):
        assert piece not in traffic


async def test_the_fake_records_broadcasts_and_unfurling_posts(no_proxy: None) -> None:
    async with FakeSlack() as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        await client.chat_postMessage(channel=CHANNEL, text="quiet", unfurl_links=False)
        await client.chat_postMessage(
            channel=CHANNEL,
            text="loud",
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "<!here> hi"}}],
            unfurl_links=False,
            unfurl_media=False,
        )
    assert slack.outgoing.broadcasts == [("chat.postMessage", "<!here")]
    assert slack.outgoing.unfurled == ["chat.postMessage"]  # the first left media on
