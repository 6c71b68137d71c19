"""The process's SQL connections: their engines, made on first use and disposed of at
shutdown, and each one's table listing, cached (a schema changes rarely; a restart or
`refresh` reads it again)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.sql.catalog import Catalog, read_catalog
from bot.sql.config import Connections, ConnectionSpec
from bot.sql.engines import async_engine, sync_engine
from bot.sql.guard import refusal
from bot.sql.query import QueryStream, open_query


class Databases:
    def __init__(self, connections: Connections) -> None:
        self.connections = connections
        self._engines: dict[str, AsyncEngine | Engine] = {}
        self._catalogs: dict[str, Catalog] = {}
        self._reading: dict[str, asyncio.Lock] = {}

    def spec(self, name: str) -> ConnectionSpec:
        return self.connections.specs[name]

    def engine(self, name: str) -> AsyncEngine | Engine:
        if name not in self._engines:
            spec = self.spec(name)
            self._engines[name] = (
                async_engine(spec) if spec.family == "postgresql" else sync_engine(spec)
            )
        return self._engines[name]

    def refusal(self, name: str, sql: str) -> str | None:
        """Why `sql` may not run on `name` (the parser's check); None when it may."""
        return refusal(sql, self.spec(name).dialect)

    @contextlib.asynccontextmanager
    async def query(self, name: str, sql: str) -> AsyncIterator[QueryStream]:
        """The query opened, within the connection's timeout, and always closed."""
        spec = self.spec(name)
        stream = await open_query(spec, self.engine(name), sql)
        try:
            yield stream
        finally:
            await stream.close()

    async def catalog(self, name: str, *, refresh: bool = False) -> Catalog:
        """The connection's tables, read once (one reader at a time per connection)."""
        lock = self._reading.setdefault(name, asyncio.Lock())
        async with lock:
            if refresh or name not in self._catalogs:
                self._catalogs[name] = await read_catalog(self.spec(name), self.engine(name))
            return self._catalogs[name]

    async def close(self) -> None:
        engines, self._engines = self._engines, {}
        for engine in engines.values():
            if isinstance(engine, AsyncEngine):
                await engine.dispose()
            else:
                await asyncio.to_thread(engine.dispose)
