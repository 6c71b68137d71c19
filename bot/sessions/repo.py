"""Checking a repository URL before a sandbox is asked to fetch it."""

from __future__ import annotations

import asyncio
import ipaddress
from urllib.parse import urlsplit

from bot.errors import BotError


class BadRepoUrl(BotError):
    """A repository URL the bot will not fetch; the message says why."""


def check_repo_url(url: str, hosts: frozenset[str] = frozenset()) -> str:
    """Accept only public https URLs without credentials (and, when `hosts` is given, only
    on those hosts); returns the URL stripped."""
    url = url.strip().strip("<>")
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise BadRepoUrl(f"Only https:// repository URLs are supported, not {url[:80]!r}.")
    if not parts.hostname:
        raise BadRepoUrl(f"The repository URL {url[:80]!r} has no host.")
    if parts.username or parts.password:
        raise BadRepoUrl("Remove the credentials from the repository URL: only public ones work.")
    if _internal(parts.hostname):
        raise BadRepoUrl(f"{parts.hostname} is a private or local address; use a public host.")
    if hosts and parts.hostname not in hosts:
        raise BadRepoUrl(
            f"Repositories on {parts.hostname} are not allowed here: {', '.join(sorted(hosts))}."
        )
    return url


def _internal(host: str) -> bool:
    """Loopback, private, link-local (cloud metadata) and other non-public addresses."""
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name; resolving it is the fetcher's business
    return not address.is_global


RESOLVE_TIMEOUT_S = 2.0


async def check_resolves_public(url: str) -> None:
    """Refuse a host whose name resolves to a private, loopback or link-local address (a way
    around the literal check). A name that does not resolve is left to the fetch to report."""
    host = urlsplit(url).hostname or ""
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, 443), RESOLVE_TIMEOUT_S)
    except (OSError, TimeoutError):
        return
    if any(_internal(info[4][0]) for info in infos):
        raise BadRepoUrl(f"{host} resolves to a private or local address; use a public host.")
