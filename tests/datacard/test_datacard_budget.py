"""Cards run in a thread pool of their own within a time budget: files that are slow to
card (or never finish) tie up that pool only, never the event loop's default executor
that sandbox and Slack work use, and a card past its budget is given up with a note."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.datacard import CardError, CardTap, budget, stream
from bot.datacard.render import for_slack
from bot.run_events import discard
from bot.sandbox.base import UPLOADS_DIR
from bot.sessions.intake import card_spooled
from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.hostile_files import MAIN, sheet, workbook
from tests.support import runtime_on

STUCK = budget.CARD_THREADS + 6  # more than the pool, and than the default executor


@pytest.fixture
def fifos(tmp_path: Path) -> Iterator[list[Path]]:
    """Named pipes posing as spooled workbooks: reading one blocks until it is released,
    like a card that never ends. Released at the end, so no thread stays blocked."""
    paths = [tmp_path / f"stuck-{i}.xlsx" for i in range(STUCK)]
    for path in paths:
        os.mkfifo(path)
    yield paths
    for path in paths:  # a reader blocked in open() gets in, then reads to the end
        fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        junk = tmp_path / "junk"
        junk.write_bytes(b"not a workbook")
        os.replace(junk, path)  # a reader that has not opened it yet finds a plain file
        os.close(fd)


@pytest.fixture
def short_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "CARD_SECONDS", 1.0)
    monkeypatch.setattr(budget, "GRACE_SECONDS", 0.5)
    monkeypatch.setattr(budget, "QUEUE_SECONDS", 2.0)


async def test_stuck_cards_leave_the_default_executor_free(
    fifos: list[Path], short_budget: None
) -> None:
    cards = [asyncio.ensure_future(card_spooled("xlsx", p, p.name)) for p in fifos]
    # Sandbox and Slack work in the default executor still gets a thread at once.
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 30) == "free"
    results = await asyncio.gather(*cards, return_exceptions=True)
    given_up = [r[0] for r in results if isinstance(r, list)]
    refused = [r for r in results if isinstance(r, CardError)]
    assert len(given_up) == budget.CARD_THREADS and len(refused) == STUCK - budget.CARD_THREADS
    assert given_up[0].notes == ["Profile stopped after 1 s: the file is in place, not profiled."]
    assert "Profile stopped after 1 s" in for_slack(given_up[0])
    assert "too busy" in str(refused[0])


async def test_a_slow_workbook_is_given_up_by_its_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget, "CARD_SECONDS", 0.01)
    styles = f"<styleSheet {MAIN}><cellXfs>" + '<xf numFmtId="14"/>' * 60_000 + "</cellXfs>"
    path = tmp_path / "slow.xlsx"
    path.write_bytes(workbook(sheet(5000), **{"xl/styles.xml": styles + "</styleSheet>"}))
    (card,) = await card_spooled("xlsx", path, "slow.xlsx")
    assert card.notes[0].startswith("Profile stopped after 0.01 s")
    plain = tmp_path / "plain.xlsx"
    plain.write_bytes(workbook(sheet(20)))
    monkeypatch.setattr(budget, "CARD_SECONDS", 30.0)
    (card,) = await card_spooled("xlsx", plain, "plain.xlsx")
    assert card.rows == 20 and not card.notes


async def _chunks(data: bytes, step: int = 65536) -> AsyncIterator[bytes]:
    for at in range(0, len(data), step):
        yield data[at : at + step]


async def test_a_stream_past_its_budget_passes_whole_with_a_card_that_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream, "SECONDS_PER_MB", 0.0)
    data = b"[" + b"1," * (2 << 20) + b"1]"  # tiny values: the slowest JSON to walk
    tap = CardTap("values.json", "json", batch=256 << 10, seconds=0.05)
    passed = b"".join([c async for c in tap.through(_chunks(data))])
    assert passed == data
    card = await tap.card()
    assert card is not None and card.rows is None
    assert card.notes[0].startswith("Profile stopped after")


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(lambda req: Reply([text("ok")])) as fake:
        yield fake


async def test_a_workbook_given_up_is_still_saved_in_the_sandbox(
    backend: str, model: FakeAnthropic, sandbox_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget, "CARD_SECONDS", 0.01)
    styles = f"<styleSheet {MAIN}><cellXfs>" + '<xf numFmtId="14"/>' * 60_000 + "</cellXfs>"
    data = workbook(sheet(5000), **{"xl/styles.xml": styles + "</styleSheet>"})
    async with runtime_on(backend, model.base_url, sandbox_root) as runtime:
        session = runtime.sessions.new("slow-card")
        try:
            taken = await session.add_file("slow.xlsx", lambda: _chunks(data))
            await session.ask("what is there?", discard)
            sandbox = await session.sandbox()
            saved = {e.name: e.size for e in await sandbox.list_dir(UPLOADS_DIR)}
        finally:
            await session.close()
    assert saved["slow.xlsx"] == len(data)
    assert taken.file.cards[0].notes[0].startswith("Profile stopped after 0.01 s")
    assert "Profile stopped after 0.01 s" in model.requests[0].system_text
