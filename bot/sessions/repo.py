"""Checking a repository URL before a sandbox is asked to fetch it."""

from __future__ import annotations

from urllib.parse import urlsplit

from bot.errors import BotError


class BadRepoUrl(BotError):
    """A repository URL the bot will not fetch; the message says why."""


def check_repo_url(url: str) -> str:
    """Accept only public https URLs without credentials; returns the URL stripped."""
    url = url.strip().strip("<>")
    parts = urlsplit(url)
    if parts.scheme != "https":
        raise BadRepoUrl(f"Only https:// repository URLs are supported, not {url[:80]!r}.")
    if not parts.hostname:
        raise BadRepoUrl(f"The repository URL {url[:80]!r} has no host.")
    if parts.username or parts.password:
        raise BadRepoUrl("Remove the credentials from the repository URL: only public ones work.")
    return url
