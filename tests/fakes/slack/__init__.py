"""A fake Slack workspace: Web API, Socket Mode, files and response URLs on loopback.

Where the sources are vague it picks the stricter reading: single-use WebSocket tickets,
Block Kit and message-length limits, enforced scopes and tokens, membership
(``not_in_channel``), downloads redirected to a CDN on another host, shape-checked acks
and rate tiers. Malformed acks and unused injected faults are raised when it closes.
The server is in ``api``; the other modules are its parts (see ``api``'s docstring).
"""

from tests.fakes.slack.api import DEFAULT_SCOPES, ApiCall, FakeSlack, Message, UploadedFile

__all__ = ["DEFAULT_SCOPES", "ApiCall", "FakeSlack", "Message", "UploadedFile"]
