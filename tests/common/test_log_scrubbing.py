"""Log records leave the process scrubbed whole: message, arguments, traceback and stack, of
the configured secrets and of token-shaped strings nobody configured."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from bot.logs import configure_logging

BOT_TOKEN = "xoxb-1111-2222-configuredtoken"
ANTHROPIC_KEY = "sk-ant-api03-configured-key-abcdef"
BUDDY_TOKEN = "buddy-configured-0123456789"
STRAY_SLACK = "xoxp-9999-8888-nobodyconfiguredthis"
STRAY_APP = "xapp-1-A0001-7777-strayapptoken"
STRAY_ANTHROPIC = "sk-ant-api03-straykey-zyxwvu"
STRAY_BEARER = "Zm9vYmFyYmF6cXV4cXV1eA"
SECRETS = [BOT_TOKEN, ANTHROPIC_KEY, BUDDY_TOKEN]
EVERY_SECRET = [*SECRETS, STRAY_SLACK, STRAY_APP, STRAY_ANTHROPIC, STRAY_BEARER]


class LeakyError(Exception):
    """An exception carrying credentials in its arguments, as SDK errors sometimes do."""


@pytest.fixture
def logged() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = configure_logging(logging.INFO, SECRETS, stream)
    try:
        yield stream
    finally:
        logging.getLogger().removeHandler(handler)  # type: ignore[arg-type]


def _raise_leaky() -> None:
    raise LeakyError(f"auth failed for {BOT_TOKEN} and {STRAY_SLACK}", ANTHROPIC_KEY)


def test_a_traceback_and_exception_arguments_are_scrubbed(logged: io.StringIO) -> None:
    log = logging.getLogger("bot.test.leaky")
    try:
        try:
            _raise_leaky()
        except LeakyError as exc:
            raise RuntimeError(f"wrapped: {STRAY_APP}") from exc
    except RuntimeError as exc:
        log.error("the call with %s failed", BUDDY_TOKEN, exc_info=exc)
        log.exception("again, header Authorization: Bearer %s", STRAY_BEARER)
    out = logged.getvalue()
    assert "Traceback" in out and "LeakyError" in out and "_raise_leaky" in out
    assert "the call with [redacted] failed" in out
    for secret in EVERY_SECRET:
        assert secret not in out


def test_a_stack_and_stray_tokens_in_arguments_are_scrubbed(logged: io.StringIO) -> None:
    log = logging.getLogger("bot.test.stack")
    log.warning("answer %r from %s", {"key": STRAY_ANTHROPIC}, STRAY_APP, stack_info=True)
    out = logged.getvalue()
    assert "Stack (most recent call last)" in out
    assert "answer {'key': '[redacted]'} from [redacted]" in out
    for secret in EVERY_SECRET:
        assert secret not in out


def test_setting_logging_up_again_writes_each_record_once(logged: io.StringIO) -> None:
    second = io.StringIO()
    handler = configure_logging(logging.INFO, SECRETS, second)
    try:
        logging.getLogger("bot.test.once").info("one line %s", BOT_TOKEN)
    finally:
        logging.getLogger().removeHandler(handler)  # type: ignore[arg-type]
    assert second.getvalue().count("one line [redacted]") == 1
    assert logged.getvalue() == ""  # the first handler was replaced
