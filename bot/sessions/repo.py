"""Checking a repository URL before a sandbox is asked to fetch it."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from bot.errors import BotError
from bot.networks import Network
from bot.sandbox.repo_net import (
    ALLOWED_PORTS,
    NO_RULES,
    FetchRules,
    RepoRefused,
    check_port,
    resolve_checked,
)


class BadRepoUrl(BotError):
    """A repository URL the bot will not fetch; the message says why."""


def check_repo_url(
    url: str,
    hosts: frozenset[str] = frozenset(),
    allowed: tuple[Network, ...] = (),
    ports: frozenset[int] = ALLOWED_PORTS,
) -> str:
    """Accept only public https URLs without credentials on an allowed port (and, when
    `hosts` is given, only on those hosts; an address in `allowed` counts as public);
    returns the URL stripped. Names are not looked up here (`check_resolves_public`)."""
    url = url.strip().strip("<>")
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise BadRepoUrl(f"Only https:// repository URLs are supported, not {url[:80]!r}.")
    if not parts.hostname:
        raise BadRepoUrl(f"The repository URL {url[:80]!r} has no host.")
    if parts.username or parts.password:
        raise BadRepoUrl("Remove the credentials from the repository URL: only public ones work.")
    rules = FetchRules(allowed, ports=ports)
    try:
        check_port(url, rules)
    except RepoRefused as exc:
        raise BadRepoUrl(_sentence(str(exc))) from None
    if _internal(parts.hostname, rules):
        raise BadRepoUrl(f"{parts.hostname} is a private or local address; use a public host.")
    if hosts and parts.hostname not in hosts:
        raise BadRepoUrl(
            f"Repositories on {parts.hostname} are not allowed here: {', '.join(sorted(hosts))}."
        )
    return url


def _internal(host: str, rules: FetchRules) -> bool:
    """Loopback, private, link-local (cloud metadata) and other non-public addresses."""
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name: see check_resolves_public
    return not rules.permits(address)


async def check_resolves_public(url: str, rules: FetchRules = NO_RULES) -> None:
    """Refuse a host whose name resolves to a private, loopback or link-local address (a way
    around the literal check), or that cannot be looked up in time. For the local backend
    only: its fetch checks again and connects to the address it checked. Buddy fetches and
    resolves by itself, so a lookup on this host would prove nothing there."""
    try:
        await resolve_checked(url, rules)
    except RepoRefused as exc:
        raise BadRepoUrl(_sentence(str(exc))) from None


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
