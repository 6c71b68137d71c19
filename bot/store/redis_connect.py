"""Opening the Redis store: connect, check the server answers, stamp or check the layout's
version, and warn when Redis would not keep the store across its own restart."""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from bot.store.base import StoreConfigError, StoreError
from bot.store.redis_keys import SCHEMA_VERSION, Keys
from bot.store.redis_prune import migrate

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0  # an unreachable host fails the start quickly
SOCKET_TIMEOUT_S = 30.0  # a stuck server fails a call rather than hanging the bot
MAX_CONNECTIONS = 64  # per client (the store's, the coordinator's)


async def connect(url: str, keys: Keys) -> Redis:
    """A client that has reached the server; a server that cannot be reached or refuses the
    login is a one-line StoreConfigError naming REDIS_URL."""
    try:
        # Commands are not retried: a write whose reply was lost may have landed, and doing
        # it again could queue a question twice. A connection that breaks mid-call fails
        # that call. RESP2: on RESP3, redis-py 8 turns on maintenance notifications and then
        # no longer checks a pooled connection before use, so after a Redis restart every
        # idle connection would fail its next call instead of reconnecting.
        # A blocking pool: at a burst of events (hundreds of threads at once) a call waits
        # for a free connection instead of failing with "Too many connections".
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=SOCKET_TIMEOUT_S,
            decode_responses=True,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=SOCKET_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
            protocol=2,
        )
        client = Redis.from_pool(pool)  # closing the client closes its pool
    except ValueError as exc:
        raise StoreConfigError(unreachable(url, exc)) from None
    try:
        await client.ping()
        await _check_schema(client, keys)
        await _check_persistence(client, url)
    except RedisError as exc:
        await client.aclose()
        raise StoreConfigError(unreachable(url, exc)) from None
    except BaseException:
        await client.aclose()
        raise
    return client


async def _check_schema(client: Redis, keys: Keys) -> None:
    """A new Redis gets the current layout's version; an older one is migrated, a newer one
    refused."""
    await client.set(keys.schema, SCHEMA_VERSION, nx=True)
    version = int(await client.get(keys.schema) or 0)
    if version == 1:  # before the indexes retention and the reaper read
        await migrate(client, keys)
        await client.set(keys.schema, SCHEMA_VERSION)
    elif version > SCHEMA_VERSION:
        raise StoreError(
            f"the Redis store has schema version {version}; this code knows {SCHEMA_VERSION}"
        )


async def _check_persistence(client: Redis, url: str) -> None:
    """Warn when Redis would lose the store on a restart (see README, Redis)."""
    try:
        config = await client.config_get("appendonly")
    except ResponseError:
        return  # CONFIG is often disabled on managed servers: theirs to get right
    if config.get("appendonly") != "yes":
        log.warning(
            "Redis at %s runs without appendonly: a Redis restart loses what the last "
            "snapshot did not save. Set appendonly yes.",
            redacted(url),
        )


def unreachable(url: str, exc: Exception) -> str:
    """The one line that says the store cannot be opened: where, why, and the setting."""
    reason = re.sub(r"\s+", " ", str(exc)).strip().rstrip(".") or type(exc).__name__
    return (
        f"Configuration error: REDIS_URL: cannot use Redis at {redacted(url)} ({reason}). "
        "Check that it runs and that REDIS_URL points at it."
    )


def redacted(url: str) -> str:
    """The URL without its password (in the address or, for unix://, in the query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "an invalid URL"
    credentials, _, host = parts.netloc.rpartition("@")
    netloc = f"{credentials.split(':')[0]}:***@{host}" if ":" in credentials else parts.netloc
    query = re.sub(r"(?i)(^|&)(password=)[^&]*", r"\1\2***", parts.query)
    return parts._replace(netloc=netloc, query=query).geturl()
