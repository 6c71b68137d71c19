"""Files taken into a session, on both backends: told by their bytes, carded, saved in the
sandbox (a .csv.gz unpacked), refused with the reason and nothing left behind, and carded
once: a resumed session reads the card from the store."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.datacard.data_file import DataFile
from bot.errors import BotError
from bot.run_events import discard
from bot.sandbox.base import UPLOADS_DIR
from bot.sessions.session import Session
from bot.store.sqlite import SqliteStore
from tests.datacard.test_datacard_formats import WORKBOOK, _zip, parquet_bytes, two_sheet_workbook
from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.support import POPULATION_CSV, runtime_on

POPULATION = POPULATION_CSV.read_bytes()


async def chunks_of(data: bytes, size: int = 64 << 10) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


async def take(session: Session, name: str, data: bytes) -> DataFile:
    return (await session.add_file(name, lambda: chunks_of(data))).file


async def uploads(session: Session) -> dict[str, int]:
    sandbox = await session.sandbox()
    return {e.name: e.size for e in await sandbox.list_dir(UPLOADS_DIR) if e.kind == "file"}


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(lambda req: Reply([text("ok")])) as fake:
        yield fake


async def test_formats_are_carded_and_saved(
    backend: str, model: FakeAnthropic, sandbox_root: Path
) -> None:
    async with runtime_on(backend, model.base_url, sandbox_root) as runtime:
        session = runtime.sessions.new("formats")
        try:
            packed = await take(session, "population.csv.gz", gzip.compress(POPULATION))
            book = await take(session, "book.xlsx", workbook := two_sheet_workbook())
            table = await take(session, "table.parquet", parquet_bytes())
            await session.ask("what is there?", discard)
            saved = await uploads(session)
        finally:
            await session.close()
    # The .csv.gz is saved unpacked, under its name without .gz, and carded as CSV.
    assert packed.path == f"{UPLOADS_DIR}/population.csv" and saved["population.csv"] == len(
        POPULATION
    )
    (card,) = packed.cards
    assert (card.rows, card.columns_total, card.aggregates.count > 0) == (795, 4, True)
    # The workbook: one card per sheet; the Parquet file from its footer.
    assert [c.name for c in book.cards] == ["book.xlsx [Population]", "book.xlsx [Sales]"]
    assert saved["book.xlsx"] == len(workbook)
    assert table.cards[0].rows == 4 and table.cards[0].columns_total == 8
    # The model was told what the files hold, before its first step.
    system = model.requests[0].system_text
    assert "795 rows × 4 columns" in system and "book.xlsx [Sales]" in system
    assert "Aggregate rows" in system


@pytest.mark.parametrize(
    ("name", "data", "why"),
    [
        (
            "bomb.xlsx",
            _zip({**WORKBOOK, "xl/worksheets/sheet1.xml": b" " * (100 << 20)}),
            "zip bomb",
        ),
        ("bomb.csv.gz", gzip.compress(b"0" * (100 << 20), mtime=0), "gzip bomb"),
        ("fake.xlsx", _zip({"word/document.xml": "<w/>"}), "a Word document"),
        ("cut.parquet", parquet_bytes()[:-10], "not a whole Parquet file"),
    ],
)
async def test_bombs_and_impostors_are_refused_and_leave_nothing(
    name: str, data: bytes, why: str, model: FakeAnthropic, sandbox_root: Path
) -> None:
    async with runtime_on("local", model.base_url, sandbox_root) as runtime:
        session = runtime.sessions.new("refusals")
        try:
            await take(session, "ok.csv", b"a,b\n1,2\n")  # the sandbox is up and in use
            with pytest.raises(BotError, match=why):
                await take(session, name, data)
            saved = await uploads(session)
        finally:
            await session.close()
    assert saved == {"ok.csv": 8}


async def test_a_resumed_session_reads_its_cards_from_the_store(
    model: FakeAnthropic, sandbox_root: Path
) -> None:
    key = "T1:C1:5.5"
    async with runtime_on("local", model.base_url, sandbox_root) as runtime:
        store = SqliteStore(sandbox_root / "cards.db")
        await store.open()
        engine = runtime.engine(store, lambda key: discard, lambda source: _population)
        try:
            await engine.add_file(key, "population.csv", _population, {"id": "F1"})
            await engine.close(key)  # the sandbox goes, the session stays
            (stored,) = await store.files(key)
            assert stored.cards and stored.cards[0]["rows"] == 795
            # A restart: another engine on the same store answers the next question.
            engine = runtime.engine(store, lambda key: discard, lambda source: _population)
            await (await engine.ask(key, "again?", user="U1"))
            await engine.close(key)
        finally:
            await store.close()
    assert "795 rows × 4 columns" in model.requests[-1].system_text


def _population() -> AsyncIterator[bytes]:
    return chunks_of(POPULATION)
