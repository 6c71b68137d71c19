"""Buddy.Works sandbox backend: each sandbox is a Buddy sandbox VM driven over the REST API.

`provider` makes and finds sandboxes; `sandbox` runs code through `commands` and moves
files through `files`. Requests go through `http` (retry policy in `retries`, answers
turned into project errors by `errors`, wire formats in `wire`); what is sent is built by
`scripts` and what comes back is read by `views`.
"""

from bot.sandbox.buddy.config import BuddyConfig
from bot.sandbox.buddy.provider import BuddyProvider
from bot.sandbox.buddy.sandbox import BuddySandbox

__all__ = ["BuddyConfig", "BuddyProvider", "BuddySandbox"]
