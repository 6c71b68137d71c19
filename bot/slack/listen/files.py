"""Files from Slack: streaming them with the bot token (their bytes tell their kind later).

A download goes to Slack's own hosts only, over https: `slack.com`, `slack-edge.com`,
`slack-files.com` and their subdomains, or the configured API URL's origin (scheme, host and
port: a stand-in for Slack in tests, on plain http). Slack answers a download with a
redirect to its CDN: redirects are followed by hand, and every hop is held to the same rule,
so a hop to plain http or to any other host is refused before anything is sent to it.
`cdn_origins` (SLACK_CDN_ORIGINS, for a test stand-in of Slack's CDN) may be reached too,
without the token. The token only ever goes to Slack's own hosts. Slack answers a download
without the right scope with an HTML sign-in page (status 200), which is caught here rather
than passed on as data. A file shared from a Slack Connect channel arrives as a stub
(`"file_access": "check_file_info"`, no name or links); `files.info` gives the whole of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from bot.errors import BotError
from bot.slack.web import SlackWeb, build_client
from bot.slack.web.errors import SlackError

MAX_REDIRECTS = 3
SLACK_DOMAINS = ("slack.com", "slack-edge.com", "slack-files.com")
DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]
CHUNK = 1 << 16


class FileUnreadable(BotError):
    """A Slack file that could not be fetched; the message says why."""


class SlackFiles:
    def __init__(
        self,
        token: str,
        api_url: str,
        session: aiohttp.ClientSession,
        web: SlackWeb | None = None,
        cdn_origins: Collection[str] = (),
    ) -> None:
        self._token = token
        self._api_origin = origin(api_url)
        self._cdn = frozenset(origin(url) for url in cdn_origins)
        self._session = session
        self._web = web or SlackWeb(build_client(token, api_url, session))

    def trusted(self, url: str) -> bool:
        """May the bot token be sent to this URL? Only to Slack's own hosts, over https,
        or to the configured API URL's origin."""
        here = origin(url)
        if here == self._api_origin:
            return True
        host = here[1]
        slack = any(host == domain or host.endswith("." + domain) for domain in SLACK_DOMAINS)
        return here[0] == "https" and slack

    def reachable(self, url: str) -> bool:
        """May a download go to this URL at all (Slack's, or a configured CDN stand-in)?"""
        return self.trusted(url) or origin(url) in self._cdn

    async def resolve(self, file: dict[str, Any]) -> dict[str, Any]:
        """The whole file object: a stub (no links) is looked up with `files.info`."""
        links = file.get("url_private_download") or file.get("url_private")
        if file.get("file_access") != "check_file_info" and (links or not file.get("id")):
            return file
        try:
            return await self._web.file_info(str(file["id"]))
        except SlackError as exc:
            said = f"Slack would not describe file {file['id']} ({exc.code})."
            raise FileUnreadable(said) from exc

    async def stream(self, file: dict[str, Any]) -> AsyncIterator[bytes]:
        """The file's bytes, chunk by chunk."""
        name = file.get("name") or file.get("id") or "the file"
        url = file.get("url_private_download") or file.get("url_private")
        if not url:
            raise FileUnreadable(f"Slack gave no download link for {name}.")
        if not self.trusted(url):
            raise FileUnreadable(f"{name} points outside Slack; it was not downloaded.")
        for _ in range(MAX_REDIRECTS + 1):
            if not self.reachable(url):  # a redirect to plain http or another host
                raise FileUnreadable(
                    f"Slack redirected the download of {name} outside Slack's https hosts; "
                    "it was not downloaded."
                )
            headers = {"Authorization": f"Bearer {self._token}"} if self.trusted(url) else {}
            async with self._session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status in (301, 302, 303, 307, 308):
                    url = _next_hop(url, response, name)
                    continue
                _check(response, name)
                async for chunk in response.content.iter_chunked(CHUNK):
                    yield chunk
                return
        raise FileUnreadable(f"Slack redirected the download of {name} too many times.")


def origin(url: str) -> Origin:
    """(scheme, host, port) of a URL, the port filled in; ("", "", 0) for a bad one."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
    except ValueError:  # a port out of range, or not a number
        return ("", "", 0)
    return (parts.scheme.lower(), (parts.hostname or "").lower(), port)


def _next_hop(url: str, response: aiohttp.ClientResponse, name: str) -> str:
    target = urljoin(url, response.headers.get("Location", ""))
    if urlsplit(target).scheme not in ("https", "http"):
        raise FileUnreadable(f"Slack redirected the download of {name} somewhere odd.")
    return target


def _check(response: aiohttp.ClientResponse, name: str) -> None:
    if response.status != 200:
        raise FileUnreadable(f"Slack refused the download of {name} (HTTP {response.status}).")
    if response.content_type == "text/html":
        raise FileUnreadable(
            f"Slack sent a sign-in page instead of {name}: the app needs the files:read "
            "scope (add it and reinstall the app)."
        )
