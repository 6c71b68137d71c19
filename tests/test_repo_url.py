"""Repository URLs the bot will and will not fetch."""

from __future__ import annotations

import pytest

from bot.networks import parse_networks
from bot.sessions.repo import BadRepoUrl, check_repo_url, check_resolves_public


@pytest.mark.parametrize(
    "url",
    ["https://github.com/owner/repo", " <https://gitlab.com/a/b.git> ", "https://8.8.8.8/r"],
)
def test_public_https_urls_pass(url: str) -> None:
    assert check_repo_url(url) == url.strip().strip("<>")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://github.com/o/r", "Only https://"),
        ("file:///etc", "Only https://"),
        ("git@github.com:o/r.git", "Only https://"),
        ("https:///path", "no host"),
        ("https://user:token@github.com/o/r", "credentials"),
        ("https://127.0.0.1/r", "private or local"),
        ("https://localhost/r", "private or local"),
        ("https://10.1.2.3/r", "private or local"),
        ("https://192.168.0.1/r", "private or local"),
        ("https://169.254.169.254/latest/meta-data", "private or local"),
        ("https://[::1]/r", "private or local"),
        ("https://[::ffff:127.0.0.1]/r", "private or local"),
        ("https://[fd00::1]/r", "private or local"),
        ("https://224.0.0.1/r", "private or local"),
        ("https://240.0.0.1/r", "private or local"),
        ("https://100.64.0.1/r", "private or local"),
        ("nonsense", "Only https://"),
    ],
)
def test_bad_urls_are_refused_with_a_reason(url: str, why: str) -> None:
    with pytest.raises(BadRepoUrl, match=why):
        check_repo_url(url)


async def test_names_that_resolve_to_local_addresses_are_refused() -> None:
    with pytest.raises(BadRepoUrl, match="resolves to a private or local address"):
        await check_resolves_public("https://localhost/owner/repo")  # resolves to 127.0.0.1


async def test_a_name_that_cannot_be_looked_up_is_refused() -> None:
    with pytest.raises(BadRepoUrl, match="could not be looked up"):
        await check_resolves_public("https://no-such-host.invalid/r")


def test_allowed_addresses_count_as_public() -> None:
    allowed = parse_networks("10.0.0.0/8, 127.0.0.1")
    assert check_repo_url("https://10.1.2.3/r", allowed=allowed) == "https://10.1.2.3/r"
    assert check_repo_url("https://[::ffff:127.0.0.1]/r", allowed=allowed)
    with pytest.raises(BadRepoUrl, match="private or local"):
        check_repo_url("https://192.168.0.1/r", allowed=allowed)
