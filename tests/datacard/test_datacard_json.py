"""Data cards of JSON Lines and JSON documents."""

from __future__ import annotations

import json

import pytest

import bot.datacard.csvprof as csvprof
from bot.datacard import DataCard, Profiler
from bot.datacard.profiler import guess_kind
from bot.datacard.render import for_model


def card_of(data: bytes, name: str = "f.json", step: int = 0, **kw: int) -> DataCard:
    profiler = Profiler(name, **kw)
    for i in range(0, len(data), step or max(1, len(data))):
        profiler.feed(data[i : i + (step or len(data))])
    return profiler.finish()


RECORDS = [
    {"country": "World", "year": 2020, "pop": 7.8e9, "ok": True, "tags": ["a"]},
    {"country": "Chad", "year": 2020, "pop": 16.4e6, "ok": False, "tags": []},
    {"country": "Peru", "year": 2021, "pop": None, "ok": True, "extra": {"x": 1}},
]


def test_json_lines() -> None:
    data = "\n".join(json.dumps(r) for r in RECORDS).encode() + b"\n"
    card = card_of(data, "f.jsonl")
    assert (card.kind, card.rows, card.columns_total) == ("jsonl", 3, 6)
    got = {c.name: c.type for c in card.columns}
    assert got == {
        "country": "text",
        "year": "integer",
        "pop": "decimal",
        "ok": "boolean",
        "tags": "array",
        "extra": "object",
    }
    pop = card.columns[2]
    assert (pop.empty, pop.low, pop.high) == (1, 16.4e6, 7.8e9)
    assert card.aggregates is not None and card.aggregates.examples == ["World"]


def test_json_lines_with_bad_and_blank_lines() -> None:
    data = b'{"a": 1}\n\n{"a": 2\n{"a": 3}\nnot json\n'
    card = card_of(data, "f.jsonl")
    assert (card.rows, card.malformed.invalid, card.malformed.blank) == (2, 2, 1)
    assert [row for row, _ in card.malformed.first] == [3, 5]


@pytest.mark.parametrize(
    "document",
    [
        RECORDS,
        {"meta": {"source": "test"}, "data": RECORDS, "count": 3},
    ],
)
def test_json_array_of_records_streamed_in_any_chunking(document: object) -> None:
    data = json.dumps(document, indent=1).encode()
    want = card_of(data).to_dict()
    assert (want["kind"], want["rows"], want["columns_total"], want["rows_exact"]) == (
        "json",
        3,
        6,
        True,
    )
    for step, block in ((1, 1), (3, 7), (50, 64)):
        assert card_of(data, step=step, block_size=block).to_dict() == want


def test_records_key_is_named() -> None:
    data = json.dumps({"data": RECORDS}).encode()
    assert 'Rows are the elements of "data"' in for_model(card_of(data))


def test_a_single_object_is_one_row() -> None:
    card = card_of(b'{"name": "x", "size": 3, "nested": {"a": 1}}')
    assert (card.rows, card.columns_total) == (1, 3)


def test_invalid_json_stops_with_a_note() -> None:
    card = card_of(b'[{"a": 1}, {"a": 2} {"a": 3}]')
    assert card.rows == 2 and not card.rows_exact and card.malformed.invalid == 1
    assert "Invalid JSON after record 2" in card.notes[0]


def test_json_cut_short() -> None:
    card = card_of(b'[{"a": 1}, {"a": 2}, {"a"')
    assert card.rows == 2 and not card.rows_exact


def test_an_element_over_the_cap_stops_profiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bot.datacard.jsonprof.LINE_CAP", 1000)
    big = json.dumps({"text": "x" * 5000})
    card = card_of(f'[{{"a": 1}}, {big}, {{"a": 2}}]'.encode(), step=100, block_size=128)
    assert card.rows == 1 and not card.rows_exact
    assert any("over" in note for note in card.notes)


def test_json_lines_large_and_sampled() -> None:
    line = b'{"id": %d, "when": "2024-01-%02d", "v": %d.5}\n'
    data = b"".join(line % (i, i % 28 + 1, i) for i in range(200_000))
    card = card_of(data, "big.jsonl", step=1 << 20)
    assert card.rows == 200_000 and card.sampled
    assert {c.name: c.type for c in card.columns} == {
        "id": "integer",
        "when": "date",
        "v": "decimal",
    }
    assert csvprof.HEAD_CELLS // 3 <= card.profiled_rows < 20_000


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"  [{}]", "json"),
        (b'{"a": 1}\n{"a": 2}\n', "jsonl"),
        (b'{\n  "a": 1\n}\n', "json"),
        (b"a,b\n1,2\n", "csv"),
    ],
)
def test_kind_from_the_first_bytes(head: bytes, kind: str) -> None:
    assert guess_kind(head) == kind
