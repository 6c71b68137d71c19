"""Slack checked once before the app connects: the API answers, and takes both tokens.

Without this, a wrong bot token only shows on the first event (Bolt checks it lazily), a
wrong app token leaves Socket Mode retrying forever, and an unreachable API ends in a
traceback. Each becomes one line naming what to fix (`python -m bot` exits with code 2).
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp

from bot.errors import ConfigError
from bot.slack.web import probe
from bot.slack.web.errors import SlackBusy, SlackError

log = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 15
BOT_TOKEN_HELP = "the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page"
APP_TOKEN_HELP = (
    "an app-level token (xapp-…) with the connections:write scope, from the app's "
    "Basic Information page"
)


class SlackSetupError(ConfigError):
    """Slack cannot be used as configured; the message names the setting to fix."""


async def check_slack(bot_token: str, app_token: str, api_url: str) -> dict[str, Any] | None:
    """Raise SlackSetupError if Slack's API cannot be reached or refuses a token. Returns
    what ``auth.test`` said of the bot token (None if Slack was too busy to say)."""
    # one try each (the SDK logs each retry, and a second line would only repeat the
    # first); a supervisor's restart is the retry
    identity = await _checked(api_url, "SLACK_BOT_TOKEN", BOT_TOKEN_HELP, bot=bot_token)
    await _checked(api_url, "SLACK_APP_TOKEN", APP_TOKEN_HELP, app=app_token)
    return identity


async def _checked(
    api_url: str, setting: str, help_text: str, **token: str
) -> dict[str, Any] | None:
    try:
        return await probe(api_url, CHECK_TIMEOUT_S, **token)
    except (SlackError, TimeoutError, aiohttp.ClientError, OSError) as exc:
        _verdict(exc, api_url, setting, help_text)
        return None


def _verdict(exc: BaseException, api_url: str, setting: str, help_text: str) -> None:
    """Passes when Slack was only busy; raises SlackSetupError naming the fix otherwise."""
    if isinstance(exc, SlackBusy):  # not a verdict on the token: connect (and retry there)
        log.warning("Slack could not check %s now (%s); connecting anyway", setting, exc.code)
        return
    if isinstance(exc, SlackError) and not exc.code:  # a wrong URL, a proxy's error page
        raise SlackSetupError(
            f"Slack's API at {api_url} answered HTTP {exc.status} without a Slack reply: "
            "check SLACK_API_URL."
        ) from None
    if isinstance(exc, SlackError):
        raise SlackSetupError(
            f"Slack refused {setting} ({exc.code}): check {setting}; it should be {help_text}."
        ) from None
    reason = str(exc) or type(exc).__name__
    raise SlackSetupError(
        f"Cannot reach Slack's API at {api_url} ({reason}): check SLACK_API_URL and the "
        "network (or proxy) settings."
    ) from None
