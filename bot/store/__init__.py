"""Durable session state: sessions, their history, files, runs, costs and tool calls."""

from bot.store.base import (
    RUN_OUTCOMES,
    SESSION_STATES,
    SESSION_UPDATABLE,
    FeedbackRecord,
    Fenced,
    FileRecord,
    NotFound,
    Pruned,
    Queued,
    RunOutcome,
    RunRecord,
    SessionRecord,
    SessionState,
    Store,
    StoreConfigError,
    StoreError,
    ToolCallRecord,
)
from bot.store.redis_store import RedisStore
from bot.store.sqlite import SqliteStore

__all__ = [
    "RUN_OUTCOMES",
    "SESSION_STATES",
    "SESSION_UPDATABLE",
    "FeedbackRecord",
    "Fenced",
    "FileRecord",
    "NotFound",
    "Pruned",
    "Queued",
    "RedisStore",
    "RunOutcome",
    "RunRecord",
    "SessionRecord",
    "SessionState",
    "SqliteStore",
    "Store",
    "StoreConfigError",
    "StoreError",
    "ToolCallRecord",
]
