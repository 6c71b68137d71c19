"""The kernel's chart JSON read as hostile bytes: anything off the schema is refused whole,
and what is kept is clean and bounded; its text summary holds the key numbers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.results.charts import Chart, Segment, Series, describe, parse_chart


def chart_json(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": 1,
        "image": "figure-1.png",
        "kind": "bar",
        "title": "Population growth 2000–2020",
        "x_label": "Country",
        "y_label": "people",
        "categories": ["India", "China"],
        "series": [{"name": "growth", "values": [350001234, 140002000.5]}],
        "segments": [],
        "note": "",
    }
    base.update(changes)
    return base


PIE = b'{"version": 1, "image": "a.png", "kind": "pie", "segments": '
PIE += b'[{"label": "a", "value": '


def encode(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


def test_a_chart_is_read_into_tuples_of_floats() -> None:
    chart = parse_chart(encode(chart_json()))
    assert chart == Chart(
        version=1,
        image="figure-1.png",
        kind="bar",
        title="Population growth 2000–2020",
        x_label="Country",
        y_label="people",
        categories=("India", "China"),
        series=(Series("growth", (350001234.0, 140002000.5)),),
        segments=(),
        note="",
    )


def test_optional_fields_default_and_nulls_are_kept() -> None:
    obj = {"version": 1, "image": "p.png", "kind": "pie", "segments": [{"label": "a", "value": 2}]}
    chart = parse_chart(encode(obj))
    assert chart is not None and chart.title == "" and chart.categories == ()
    assert chart.segments == (Segment("a", 2.0),)
    gaps = parse_chart(encode(chart_json(series=[{"name": "s", "values": [None, 3]}])))
    assert gaps is not None and gaps.series[0].values == (None, 3.0)


@pytest.mark.parametrize(
    "changes",
    [
        {"version": 2},
        {"version": "1"},
        {"version": True},
        {"kind": "scatter"},
        {"kind": None},
        {"image": ""},
        {"image": "../../etc/passwd"},
        {"image": "out/figure.png"},
        {"image": 7},
        {"title": 12},
        {"title": ["nested"]},
        {"x_label": {"a": 1}},
        {"categories": "India"},
        {"categories": ["India", 2]},
        {"series": {"name": "s"}},
        {"series": [{"name": "s", "values": [1]}]},  # fewer values than categories
        {"series": [{"name": "s", "values": [1, 2, 3]}]},  # more
        {"series": [{"name": "s", "values": [True, 2]}]},  # a bool is not a number
        {"series": [{"name": "s", "values": ["1", 2]}]},
        {"series": [{"name": "s", "values": [[1], 2]}]},
        {"series": [{"name": 5, "values": [1, 2]}]},
        {"series": ["s"]},
        {"segments": [{"label": "a", "value": False}]},
        {"segments": [{"label": "a"}]},
        {"segments": [{"label": "a", "value": 10**400}]},
        {"series": [{"name": "s", "values": [1, 2]}] * 51},
        {"categories": ["c"] * 1001, "series": []},
        {"segments": [{"label": "a", "value": 1}] * 101},
        {"extra": {"deep": {"deeper": [[1]]}}},  # deeper than the schema
    ],
)
def test_off_schema_is_refused(changes: dict[str, Any]) -> None:
    assert parse_chart(encode(chart_json(**changes))) is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"null",
        b"[]",
        b'"chart"',
        b"{",
        "{}".encode("utf-16"),
        b"\xff\xfe{\x00}",
        b'{"version": 1, "image": "a.png", "kind": "bar", "series": [{"values": [NaN]}]}',
        PIE + b'Infinity}]}',
        PIE + b'-Infinity}]}',
        PIE + b'1e999}]}',
        b"[" * 200_000 + b"]" * 200_000,
        b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
    ],
    ids=[
        "empty", "null", "list", "string", "broken", "utf16", "not-utf8", "nan", "inf", "-inf",
        "overflow", "deep-lists", "deep-objects",
    ],
)  # fmt: skip
def test_hostile_bytes_are_refused(data: bytes) -> None:
    assert parse_chart(data) is None


def test_over_512_kib_is_refused_even_when_valid() -> None:
    padded = chart_json(note="x" * 10)
    data = encode(padded)
    assert parse_chart(data) is not None
    big = data[:-1] + b" " * (512 * 1024 - len(data) + 1) + b"}"
    assert len(big) > 512 * 1024
    assert parse_chart(big) is None
    at_limit = data[:-1] + b" " * (512 * 1024 - len(data)) + b"}"
    assert len(at_limit) == 512 * 1024 and parse_chart(at_limit) is not None


def test_strings_lose_control_characters_and_are_clipped() -> None:
    title = "Sales\x1b[31m\u202e\x00 by\nregion" + "y" * 500
    chart = parse_chart(encode(chart_json(title=title, categories=["a\tb", "c"])))
    assert chart is not None
    assert chart.title.startswith("Sales [31m by region")
    assert all(ord(ch) >= 32 for ch in chart.title) and "\u202e" not in chart.title
    assert len(chart.title) == 200
    assert chart.categories == ("a b", "c")


def test_the_limits_themselves_are_accepted() -> None:
    cats = [f"c{i}" for i in range(1000)]
    series = [{"name": f"s{i}", "values": [1] * 1000} for i in range(50)]
    chart = parse_chart(encode(chart_json(categories=cats, series=series)))
    assert chart is not None and len(chart.series) == 50 and len(chart.categories) == 1000
    pie = parse_chart(encode(chart_json(kind="pie", segments=[{"label": "a", "value": 1}] * 100)))
    assert pie is not None and len(pie.segments) == 100


def test_describe_names_the_kind_title_unit_and_numbers() -> None:
    chart = parse_chart(encode(chart_json()))
    assert chart is not None
    assert describe(chart) == (
        "Bar chart: Population growth 2000–2020 (people). India 350,001,234; China 140,002,000.50"
    )


def test_describe_keeps_as_many_numbers_as_fit() -> None:
    cats = [f"Country {i}" for i in range(100)]
    chart = parse_chart(encode(chart_json(categories=cats, series=[{"values": list(range(100))}])))
    assert chart is not None
    text = describe(chart, limit=200)
    assert len(text) <= 200 and text.endswith("; …") and "Country 0 0" in text
    assert "Country 99" not in text
    assert len(describe(chart, limit=20)) <= 20


def test_describe_pies_and_several_series() -> None:
    pie = parse_chart(
        encode(
            chart_json(
                kind="pie",
                title="Share",
                y_label="",
                segments=[{"label": "Organic", "value": 60}, {"label": "Paid", "value": 0.25}],
            )
        )
    )
    assert pie is not None and describe(pie) == "Pie chart: Share. Organic 60; Paid 0.25"
    two = parse_chart(
        encode(
            chart_json(
                kind="line",
                title="",
                y_label="",
                series=[{"name": "Web", "values": [1, None]}, {"name": "", "values": [3, 4]}],
            )
        )
    )
    assert two is not None
    assert describe(two) == "Line chart. Web: India 1; China n/a; Series 2: India 3; China 4"
