"""A fake Slack workspace: Web API, Socket Mode, files and response URLs on loopback.

Where the sources are vague it picks the stricter reading: single-use WebSocket tickets,
Block Kit and message-length limits, enforced scopes and tokens, membership
(``not_in_channel``), downloads redirected to a CDN on another host, shape-checked acks
and rate tiers. Slack's data blocks (table, data_table, data_visualization),
``blocks.validate`` and canvases come with switches where the sources disagree (see
``FakeSlack``'s docstring). Malformed acks and unused injected faults are raised when it
closes. The server is in ``api``; the other modules are its parts (see ``api``'s docstring).
"""

from tests.fakes.slack.api import (
    DEFAULT_SCOPES,
    ApiCall,
    Canvas,
    FakeSlack,
    Message,
    SurfaceRules,
    UploadedFile,
)

__all__ = [
    "DEFAULT_SCOPES",
    "ApiCall",
    "Canvas",
    "FakeSlack",
    "Message",
    "SurfaceRules",
    "UploadedFile",
]
