"""Buddy.Works sandbox backend: each sandbox is a Buddy sandbox VM driven over the REST API."""

from bot.sandbox.buddy.provider import BuddyConfig, BuddyProvider, BuddySandbox

__all__ = ["BuddyConfig", "BuddyProvider", "BuddySandbox"]
