"""Cards on the event loop: profiling a stream on its way through, and gzip with limits."""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import AsyncIterator

import pytest

from bot.datacard import CardError, CardTap, Profiler, gunzip
from bot.datacard.stream import GZIP_SLACK
from tests.support import DATA

POPULATION = DATA / "population_2000_2010_2020.csv"


async def chunks(data: bytes, step: int = 65536) -> AsyncIterator[bytes]:
    for i in range(0, len(data), step):
        yield data[i : i + step]


async def test_chunks_pass_through_unchanged_and_the_card_matches() -> None:
    data = POPULATION.read_bytes() * 60  # about 1.5 MB: more than one batch
    tap = CardTap("population.csv", batch=256 << 10)
    out = [c async for c in tap.through(chunks(data, 5000))]
    assert b"".join(out) == data and all(len(c) <= 5000 for c in out)
    card = await tap.card()
    profiler = Profiler("population.csv")
    profiler.feed(data)
    assert card is not None and card.to_dict() == profiler.finish().to_dict()
    assert card.rows == 795 * 60 + 59  # the repeated header lines are rows too


async def test_take_profiles_batches_someone_else_gathers() -> None:
    data = POPULATION.read_bytes()
    tap = CardTap("population.csv")
    for i in range(0, len(data), 1000):
        await tap.take(data[i : i + 1000])
    card = await tap.card()
    assert card is not None and card.rows == 795


async def test_a_profiler_failure_does_not_stop_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Profiler, chunk: bytes) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(Profiler, "feed", broken)
    tap = CardTap("x.csv", batch=10)
    data = b"a,b\n1,2\n" * 100
    assert b"".join([c async for c in tap.through(chunks(data, 64))]) == data
    assert await tap.card() is None


async def test_csv_gz_is_unpacked_and_carded() -> None:
    raw = POPULATION.read_bytes()
    packed = gzip.compress(raw[:10_000]) + gzip.compress(raw[10_000:])  # two members
    tap = CardTap("population.csv")
    unpacked = [c async for c in tap.through(gunzip(chunks(packed, 777), "population.csv.gz"))]
    assert hashlib.sha256(b"".join(unpacked)).digest() == hashlib.sha256(raw).digest()
    card = await tap.card()
    assert card is not None and (card.rows, card.columns_total) == (795, 4)


async def test_a_gzip_bomb_is_refused_before_it_unpacks_much() -> None:
    bomb = gzip.compress(bytes(256 << 20))  # 256 MB of zeros in about 250 KB
    unpacked = 0
    with pytest.raises(CardError, match=r"bomb.csv.gz: it expands more than 200 times"):
        async for out in gunzip(chunks(bomb), "bomb.csv.gz"):
            unpacked += len(out)
    assert unpacked <= GZIP_SLACK + (2 << 20)


async def test_gzip_size_cap() -> None:
    packed = gzip.compress(bytes(range(256)) * 40_000)  # 10 MB that packs only a little
    with pytest.raises(CardError, match="unpacks to more than"):
        async for _ in gunzip(chunks(packed), "big.csv.gz", max_bytes=5 << 20):
            pass


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (gzip.compress(b"a,b\n1,2\n" * 1000, mtime=0)[:-12], "ends early"),
        (b"a,b\n1,2\n", "not valid gzip"),
        (b"", "empty"),
    ],
)
async def test_broken_gzip_is_refused(data: bytes, why: str) -> None:
    with pytest.raises(CardError, match=why):
        async for _ in gunzip(chunks(data), "x.csv.gz"):
            pass
