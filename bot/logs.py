"""Logging for both front ends: one handler, every record scrubbed whole before it is written."""

from __future__ import annotations

import logging
from typing import TextIO

from bot.scrub import Scrubber, install_log_scrubbing

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


# generic only in the type stubs: subscripting it at run time would fail
class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Ours, so setting logging up again replaces it instead of writing each line twice."""


def configure_logging(
    level: int, secrets: list[str], stream: TextIO | None = None
) -> logging.Handler | None:
    """Log to `stream` at `level`, scrubbed of `secrets` and of token-shaped strings. With no
    `stream`, as logging.basicConfig: stderr, unless the root logger has handlers already (an
    embedding program's, a test runner's); those are scrubbed too."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler: logging.Handler | None = None
    if stream is not None or not root.handlers:
        handler = _Handler(stream)
        handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    install_log_scrubbing(Scrubber(secrets), root)
    return handler
