"""Repository URLs the bot will and will not fetch."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.networks import parse_networks
from bot.sessions.repo import BadRepoUrl, check_repo_url, check_resolves_public


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/owner/repo",
        " <https://gitlab.com/a/b.git> ",
        "https://8.8.8.8/r",
        "https://github.com:443/o/r",
        "https://[64:ff9b::8c52:7003]/r",  # NAT64 of a public address (an IPv6-only host)
        "https://[2002:8c52:7003::1]/r",  # 6to4 of a public address
    ],
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
        ("https://[2002:7f00:1::]/r", "private or local"),  # 6to4 of 127.0.0.1
        ("https://[2002:a9fe:a9fe::1]/r", "private or local"),  # 6to4 of cloud metadata
        ("https://[2001:0:4136:e378:8000:63bf:f5ff:fffd]/r", "private or local"),  # Teredo
        ("https://[64:ff9b::a9fe:a9fe]/r", "private or local"),  # NAT64 of metadata
        ("https://[64:ff9b:1::7f00:1]/r", "private or local"),  # local NAT64 of loopback
        ("https://[64:ff9b:1:7f00:1::]/r", "private or local"),  # the same, laid out for /48
        ("https://github.com:22/o/r", "Port 22 is not allowed"),
        ("https://github.com:8443/o/r", "Port 8443 is not allowed"),
        ("https://github.com:99999/o/r", "port"),
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


def test_an_operator_may_allow_other_ports() -> None:
    url = "https://git.example.com:8443/o/r"
    assert check_repo_url(url, ports=frozenset({443, 8443})) == url
    with pytest.raises(BadRepoUrl, match="only 443, 8443"):
        check_repo_url("https://git.example.com:80/o/r", ports=frozenset({443, 8443}))


def test_allowed_networks_count_for_the_address_an_ipv6_one_carries() -> None:
    allowed = parse_networks("10.0.0.0/8")
    assert check_repo_url("https://[2002:a01:203::]/r", allowed=allowed)  # 6to4 of 10.1.2.3
    assert check_repo_url("https://[64:ff9b::a01:203]/r", allowed=allowed)  # NAT64 of it


def test_repo_allowed_ports_is_checked_at_start() -> None:
    from bot.errors import ConfigError
    from bot.settings import load_settings

    assert load_settings(repo_allowed_ports="443, 8443").repo_allowed_ports
    with pytest.raises(ConfigError, match="REPO_ALLOWED_PORTS"):
        load_settings(repo_allowed_ports="443,https")


async def test_analyze_leaves_the_name_to_buddy_and_looks_it_up_for_a_local_fetch(
    backend: str, sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This host resolves no name (as behind a proxy): Buddy, which fetches the repository
    itself, gets it anyway; the local backend, which fetches it here, refuses at once."""
    from tests.fakes.anthropic import Reply, text, tool_use
    from tests.git_http import make_repo
    from tests.slack_harness import CHANNEL, running_bot

    repo = make_repo(sandbox_root / "srv", {"data.csv": b"a,b\n1,2\n"})
    url = "https://git.example.invalid/acme/data"

    def script(req):
        if req.turn == 0:
            return Reply([tool_use("list_files", {"path": "/buddy/data"})])
        return Reply([text("found: " + req.tool_results()[-1].text)])

    def started(h) -> list:
        return [m for m in h.slack.messages.get(CHANNEL, [])
                if "asked me to analyze" in (m.get("text") or "")]  # fmt: skip

    async with running_bot(backend, script, sandbox_root, monkeypatch) as h:
        if h.buddy is not None:
            h.buddy.repos[url] = repo
        ack = await h.slack.wait_for_ack(await h.slack.slash_command("/analyze", url))
        if backend == "local":
            assert "could not be looked up" in str(ack.get("payload"))
            assert not started(h)
            return
        assert not ack.get("payload")
        await h.slack.wait_for(lambda: started(h), 30)
        await h.wait_for_text(started(h)[0]["ts"], "data.csv", 60)
