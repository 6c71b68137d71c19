"""The model's SQL tools: `list_tables` and `run_sql`, over the connections the thread's
channel may use. They run in the bot process, never in the sandbox: the bot holds the
credentials, checks each statement, and streams the rows into a file in the sandbox. The
model sees only results: row counts, columns, a preview, and refusals with their reasons.

Only the allowed connections are offered, or even named, in the tools' descriptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.agent.schemas import input_schema
from bot.clip import clip
from bot.sandbox.base import WORK_DIR, Sandbox
from bot.scrub import NO_SECRETS, Scrubber
from bot.sql.config import ConnectionSpec
from bot.sql.databases import Databases
from bot.sql.query import QueryFailed, QueryResult, describe

QUERIES_DIR = f"{WORK_DIR}/queries"
SAVE_AS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
PREVIEW_CELL = 40  # characters of one value in the preview
SQL_TOOLS = ("list_tables", "run_sql")


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListTables(_Input):
    connection: str = Field(description="The connection's name.")
    refresh: bool = Field(default=False, description="Read the tables again (cached).")


class RunSql(_Input):
    connection: str = Field(description="The connection's name.")
    sql: str = Field(min_length=1, description="One read-only query (SELECT, WITH, VALUES).")
    save_as: str = Field(
        pattern=SAVE_AS.pattern,
        description="File name without extension: the rows are saved to "
        f"{QUERIES_DIR}/<save_as>.csv (letters, digits, _ and -).",
    )


@dataclass(frozen=True)
class SqlAnswer:
    """What a SQL tool call produced, for the model and for progress displays."""

    content: str
    is_error: bool
    status: str
    excerpt: str
    duration_s: float = 0.0


class SqlDesk:
    """The SQL tools of one session: the connections its channel may use."""

    def __init__(
        self, databases: Databases, allowed: Sequence[str], scrubber: Scrubber = NO_SECRETS
    ) -> None:
        """`scrubber` cleans the rows on their way into the sandbox: a credential that a
        table happens to hold stays out of it too."""
        self._databases = databases
        self._scrubber = scrubber
        self._allowed = tuple(n for n in allowed if n in databases.connections.specs)

    @property
    def offered(self) -> bool:
        return bool(self._allowed)

    def definitions(self) -> list[dict[str, Any]]:
        """The two tools, describing the allowed connections and their limits."""
        if not self._allowed:
            return []
        names = list(self._allowed)
        listing = "\n".join(self._line(self._databases.spec(n)) for n in names)
        list_text = (
            "List the tables and views of a SQL connection: columns with types, a row "
            "estimate and example values. Connections:\n" + listing
        )
        run_text = (
            "Run one read-only SQL query on a connection, in its own SQL dialect. The rows "
            f"are saved to {QUERIES_DIR}/<save_as>.csv in the sandbox (read it with "
            "run_code); you get the row count, whether the rows were capped, the columns "
            "and the first rows. Only SELECT, WITH, VALUES and EXPLAIN run: no writes, no "
            "session changes, no file or network functions. Aggregate in SQL where you can; "
            "the caps cut longer results. Connections and their limits:\n" + listing
        )
        return [
            _definition("list_tables", ListTables, list_text, names),
            _definition("run_sql", RunSql, run_text, names),
        ]

    @staticmethod
    def _line(spec: ConnectionSpec) -> str:
        about = f": {spec.description}" if spec.description else ""
        limits = (
            f"at most {spec.max_rows:,} rows and {spec.max_bytes // (1 << 20):,} MB saved, "
            f"{spec.preview_rows} rows shown to you, {spec.timeout_s:g} s per query"
        )
        if spec.max_bytes_billed:
            limits += f", {spec.max_bytes_billed:,} bytes scanned"
        return f"- {spec.name} ({spec.family}){about} [{limits}]"

    def known(self, name: str) -> str | None:
        """Why `name` is not a connection here; None when it is. A connection the channel
        may not use is answered as if it did not exist."""
        if name in self._allowed:
            return None
        offered = ", ".join(self._allowed) or "none"
        return f"Unknown connection {name!r}. Connections here: {offered}."

    async def list_tables(self, parsed: ListTables) -> SqlAnswer:
        if why := self.known(parsed.connection):
            return SqlAnswer(why, True, "invalid", why)
        try:
            catalog = await self._databases.catalog(parsed.connection, refresh=parsed.refresh)
        except TimeoutError:
            why = f"Reading the tables of {parsed.connection} took too long."
            return SqlAnswer(why, True, "timeout", why)
        except Exception as exc:  # the database's boundary, as for a query
            why = f"Could not read the tables of {parsed.connection}: {describe(exc)}"
            return SqlAnswer(why, True, "error", why)
        text = catalog.describe()
        return SqlAnswer(text, False, "ok", f"{len(catalog.tables)} tables")

    async def run_sql(self, parsed: RunSql, sandbox: Sandbox, output_chars: int) -> SqlAnswer:
        if why := self.known(parsed.connection):
            return SqlAnswer(why, True, "invalid", why)
        if why := self._databases.refusal(parsed.connection, parsed.sql):
            text = f"Refused, nothing was run: {why}"
            return SqlAnswer(text, True, "refused", text)
        spec = self._databases.spec(parsed.connection)
        path = f"{QUERIES_DIR}/{parsed.save_as}.csv"
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(spec.timeout_s):
                result, error = await self._stream(parsed, sandbox, path)
        except TimeoutError:
            await _remove(sandbox, path)
            text = f"The query ran past the {spec.timeout_s:g} s limit and was cancelled."
            return SqlAnswer(text, True, "timeout", text, loop.time() - started)
        except QueryFailed as exc:
            text = f"The database refused the query: {exc}"
            if exc.lost:
                text = (
                    f"The connection to {spec.name} was lost while the query ran, and no "
                    f"file was kept ({exc}). The next query connects again."
                )
            return SqlAnswer(text, True, "error", text, loop.time() - started)
        took = loop.time() - started
        if error:
            await _remove(sandbox, path)
            text = f"The query failed part-way, and no file was kept: {error}"
            return SqlAnswer(text, True, "error", text, took)
        text = _summary(parsed, spec, path, result, output_chars)
        return SqlAnswer(text, False, "ok", _excerpt(parsed, result, path), took)

    async def _stream(self, parsed: RunSql, sandbox: Sandbox, path: str) -> tuple[QueryResult, str]:
        try:
            async with self._databases.query(parsed.connection, parsed.sql) as query:
                await sandbox.upload(path, _scrubbed(query.csv(), self._scrubber))
                return query.result, query.error
        except BaseException:
            await _remove(sandbox, path)
            raise


def _definition(name: str, model: type[BaseModel], text: str, names: list[str]) -> dict[str, Any]:
    schema = input_schema(model)
    schema["properties"]["connection"]["enum"] = names
    return {"name": name, "description": text, "input_schema": schema}


def _summary(
    parsed: RunSql, spec: ConnectionSpec, path: str, result: QueryResult, output_chars: int
) -> str:
    capped = f"yes: stopped at {result.capped}" if result.capped else "no"
    lines = [
        f"saved: {path} ({result.bytes:,} bytes, CSV with a header row)",
        f"connection: {spec.name}",
        f"rows: {result.rows:,}",
        f"capped: {capped}",
        f"columns: {', '.join(result.columns)}",
        f"duration_s: {result.duration_s:.2f}",
    ]
    if result.preview:
        lines.append(f"--- first {len(result.preview)} rows ---")
        lines.append(_table(result.columns, result.preview))
    return clip("\n".join(lines), output_chars)


def _table(columns: list[str], rows: list[tuple[Any, ...]]) -> str:
    def cell(value: Any) -> str:
        shown = "" if value is None else str(value).replace("\n", " ")
        return shown if len(shown) <= PREVIEW_CELL else shown[: PREVIEW_CELL - 1] + "…"

    out = [" | ".join(columns)]
    out += [" | ".join(cell(v) for v in row) for row in rows]
    return "\n".join(out)


def _excerpt(parsed: RunSql, result: QueryResult, path: str) -> str:
    capped = " (capped)" if result.capped else ""
    name = path.rsplit("/", 1)[-1]
    return f"{result.rows:,} rows{capped} from {parsed.connection} → queries/{name}"


async def _scrubbed(chunks: AsyncIterator[bytes], scrubber: Scrubber) -> AsyncIterator[bytes]:
    if not scrubber.has_secrets:
        async for chunk in chunks:
            yield chunk
        return
    stream = scrubber.stream()
    async for chunk in chunks:
        if clean := stream.feed(chunk):
            yield clean
    if tail := stream.end():
        yield tail


async def _remove(sandbox: Sandbox, path: str) -> None:
    """A file a failed query began is not left half written."""
    with contextlib.suppress(Exception):  # a failing sandbox is reported by the next call
        await asyncio.shield(sandbox.run_code("bash", f"rm -f -- '{path}'", 30))
