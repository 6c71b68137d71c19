"""Slack checked once before the app connects: the API answers, and takes both tokens.

Without this, a wrong bot token only shows on the first event (Bolt checks it lazily), a
wrong app token leaves Socket Mode retrying forever, and an unreachable API ends in a
traceback. Each becomes one line naming what to fix (`python -m bot` exits with code 2).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.errors import ConfigError

log = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 15
BOT_TOKEN_HELP = "the Bot User OAuth Token (xoxb-…) on the app's OAuth & Permissions page"
APP_TOKEN_HELP = (
    "an app-level token (xapp-…) with the connections:write scope, from the app's "
    "Basic Information page"
)


# Slack busy, not a verdict on the token: the app goes on connecting (and retries there).
PASSING = frozenset({"ratelimited", "fatal_error", "internal_error", "service_unavailable"})


class SlackSetupError(ConfigError):
    """Slack cannot be used as configured; the message names the setting to fix."""


async def check_slack(bot_token: str, app_token: str, api_url: str) -> dict[str, Any] | None:
    """Raise SlackSetupError if Slack's API cannot be reached or refuses a token. Returns
    what ``auth.test`` said of the bot token (None if Slack was too busy to say)."""
    # one try each: no retry handler (the SDK logs each retry, and a second line would only
    # repeat the first); a supervisor's restart is the retry
    client = AsyncWebClient(base_url=api_url, timeout=CHECK_TIMEOUT_S, retry_handlers=[])
    testing = client.auth_test(token=bot_token)
    bot = await _call(testing, api_url, "SLACK_BOT_TOKEN", BOT_TOKEN_HELP)
    # hands out a Socket Mode URL that goes unused: the cheapest call the app token may make
    opening = client.apps_connections_open(app_token=app_token)
    await _call(opening, api_url, "SLACK_APP_TOKEN", APP_TOKEN_HELP)
    return dict(bot.data) if isinstance(bot, AsyncSlackResponse) else None


async def _call(call: Awaitable[object], api_url: str, setting: str, help_text: str) -> object:
    try:
        return await call
    except SlackApiError as exc:
        error = exc.response.get("error") if isinstance(exc.response.data, dict) else None
        if error in PASSING or exc.response.status_code in (429, 500, 502, 503, 504):
            log.warning("Slack could not check %s now (%s); connecting anyway", setting, error)
            return None
        if not error:  # not Slack's API answering (a wrong URL, a proxy's error page)
            status = exc.response.status_code
            raise SlackSetupError(
                f"Slack's API at {api_url} answered HTTP {status} without a Slack reply: "
                "check SLACK_API_URL."
            ) from None
        raise SlackSetupError(
            f"Slack refused {setting} ({error}): check {setting}; it should be {help_text}."
        ) from None
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        reason = str(exc) or type(exc).__name__
        raise SlackSetupError(
            f"Cannot reach Slack's API at {api_url} ({reason}): check SLACK_API_URL and the "
            "network (or proxy) settings."
        ) from None
