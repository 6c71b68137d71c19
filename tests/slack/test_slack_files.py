"""Slack file downloads (bot/slack/listen/files.py) against the fake Slack and its CDN: https to
Slack's hosts only, every redirect held to the same rule, and the bot token nowhere else."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from bot.slack.listen.files import FileUnreadable, SlackFiles
from tests.fakes.loopback import serve
from tests.fakes.slack import FakeSlack

CSV = b"a,b\n1,2\n"


async def read(files: SlackFiles, file: dict) -> bytes:
    return b"".join([chunk async for chunk in files.stream(file)])


@pytest.fixture
async def slack(no_proxy: None) -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        yield fake


async def test_a_redirect_to_plain_http_elsewhere_is_refused(slack: FakeSlack) -> None:
    """Slack's download answers a 302 to the fake CDN: http, on 127.0.0.2. Unless it is
    configured as a stand-in for Slack's CDN, nothing is sent there."""
    assert slack.cdn is not None and slack.cdn.base_url.startswith("http://127.0.0.2:")
    file = slack.add_file("data.csv", CSV)
    async with aiohttp.ClientSession() as http:
        files = SlackFiles(slack.bot_token, slack.api_url, http)
        with pytest.raises(FileUnreadable, match="outside Slack's https hosts"):
            await read(files, file)
        assert slack.cdn.requests == []  # refused before any request went there
        stand_in = SlackFiles(
            slack.bot_token, slack.api_url, http, cdn_origins=[slack.cdn.base_url]
        )
        assert await read(stand_in, file) == CSV
    assert slack.cdn.tokens_seen == []  # reachable, but no token for it


async def test_the_token_goes_to_the_api_origin_only(slack: FakeSlack) -> None:
    """Another port on the API's host is another origin: no token, no download."""
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=CSV, content_type="text/csv")

    app = web.Application()
    app.router.add_get("/{tail:.*}", elsewhere)
    runner, other = await serve(app)  # 127.0.0.1, another port
    try:
        async with aiohttp.ClientSession() as http:
            files = SlackFiles(slack.bot_token, slack.api_url, http)
            with pytest.raises(FileUnreadable, match="outside Slack"):
                await read(files, {"name": "x.csv", "url_private": f"{other}/files-pri/x.csv"})
    finally:
        await runner.cleanup()
    assert seen == []


async def test_only_slacks_https_hosts_are_trusted() -> None:
    async with aiohttp.ClientSession() as http:
        files = SlackFiles("xoxb-1", "https://slack.com/api/", http)
    assert files.trusted("https://files.slack.com/files-pri/T1-F1/x.csv")
    assert files.trusted("https://a.slack-edge.com/x") and files.trusted(
        "https://slack-files.com/x"
    )
    assert files.trusted("https://slack.com:443/api/")  # the API's own origin, port spelt out
    for url in (
        "http://files.slack.com/files-pri/T1-F1/x.csv",  # plain http
        "https://files.slack.com.evil.example/x",
        "https://evilslack.com/x",
        "https://evil.example/?u=https://files.slack.com/",
        "https://files.slack.com:99999/x",  # not a port
    ):
        assert not files.trusted(url) and not files.reachable(url), url
