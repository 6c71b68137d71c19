"""The figures of an answer and the step outputs that printed them (bot.trace)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence

import pytest

from bot.trace import Figure, Source, Trace, figures, summary, trace
from bot.trace.figures import Figure as FigureFromModule

POPULATION_ANSWER = (
    "India grew by 350,001,234 (from 1,059,633,675 to 1,409,634,909) between 2000 and 2020."
)
POPULATION_OUTPUT = json.dumps({"India": [1059633675, 1409634909], "growth": 350001234})


def texts(answer: str, question: str = "") -> list[str]:
    return [figure.text for figure in figures(answer, question)]


def step_of(answer: str, *outputs: str) -> list[int | None]:
    sources = [Source(step=n, output=output) for n, output in enumerate(outputs, 1)]
    return [item.step for item in trace(answer, sources)]


def traced(figure_text: str, output: str) -> bool:
    """Whether the answer "… <figure_text> …" is traced to `output`."""
    (item,) = trace(f"It was {figure_text} in all.", [Source(1, output)])
    assert item.figure.text == figure_text
    return item.step == 1


# --- Reading figures -------------------------------------------------------------------


def test_population_figures_are_read_with_values_and_spans() -> None:
    found = figures(POPULATION_ANSWER)
    assert [f.text for f in found] == ["350,001,234", "1,059,633,675", "1,409,634,909"]
    assert [f.value for f in found] == [350001234, 1059633675, 1409634909]
    for figure in found:
        assert POPULATION_ANSWER[figure.start : figure.end] == figure.text
        assert figure.decimals == 0 and not figure.percent
    assert FigureFromModule is Figure


def test_population_answer_traces_to_json_output() -> None:
    items = trace(POPULATION_ANSWER, [Source(1, "loaded 651 rows"), Source(2, POPULATION_OUTPUT)])
    assert [item.step for item in items] == [2, 2, 2]
    assert items[0].line == POPULATION_OUTPUT
    assert summary(items) == "3 figures, all traced to step 2"


def test_population_growth_no_step_printed_is_not_found() -> None:
    sources = [Source(1, "[1059633675, 1409634909]"), Source(2, "[350001234]")]
    assert summary(trace(POPULATION_ANSWER, sources[:1])) == (
        "2 of 3 figures traced; not found: 350,001,234"
    )
    assert summary(trace(POPULATION_ANSWER, sources)) == "3 figures, all traced to steps 1–2"


@pytest.mark.parametrize(
    ("answer", "text", "value", "decimals", "percent"),
    [
        ("a rise of 4.7% overall", "4.7%", 4.7, 1, True),
        ("a rise of 4.7 % overall", "4.7 %", 4.7, 1, True),
        ("a rise of 12 percent", "12 percent", 12, 0, True),
        ("a fall of -3.2 million", "-3.2 million", -3.2e6, 1, False),
        ("a fall of −3.2 million", "−3.2 million", -3.2e6, 1, False),
        ("a gain of +15.25", "+15.25", 15.25, 2, False),
        ("revenue of $1.4B", "$1.4B", 1.4e9, 1, False),
        ("revenue of €12k", "€12k", 12e3, 0, False),
        ("revenue of £3.2m", "£3.2m", 3.2e6, 1, False),
        ("revenue of 2.5 bn", "2.5 bn", 2.5e9, 1, False),
        ("some 350 thousand people", "350 thousand", 350e3, 0, False),
        ("some 12\u202f345 people", "12\u202f345", 12345, 0, False),
        ("some 12\u00a0345 people", "12\u00a0345", 12345, 0, False),
        ("a ratio of 0.25", "0.25", 0.25, 2, False),
        ("about 1.5e3 rows", "1.5e3", 1500, -2, False),
        ("about 2e5 rows", "2e5", 2e5, -5, False),
        ("about 1,400,000,000 people", "1,400,000,000", 1.4e9, -8, False),
        ("about 1,000,000 people", "1,000,000", 1e6, -5, False),
        ("exactly 100,200 people", "100,200", 100200, 0, False),
        ("it ran 12km", "12", 12, 0, False),
        ("a run of 3.2m", "3.2", 3.2, 1, False),
    ],
)
def test_figure_formats(answer: str, text: str, value: float, decimals: int, percent: bool) -> None:
    (figure,) = figures(answer)
    assert (figure.text, figure.decimals, figure.percent) == (text, decimals, percent)
    assert figure.value == pytest.approx(value)
    assert answer[figure.start : figure.end] == text


def test_figures_inside_markdown_tables_bold_and_code() -> None:
    answer = (
        "| Country | 2000 | 2020 | Growth |\n"
        "|---|---:|---:|---:|\n"
        "| India | 1,059,633,675 | **1,409,634,909** | `33.0%` |\n"
        "| China | 1,262,645,000 | 1,411,100,000 | *11.8%* |\n"
    )
    assert texts(answer) == [
        "1,059,633,675",
        "1,409,634,909",
        "33.0%",
        "1,262,645,000",
        "1,411,100,000",
        "11.8%",
    ]


def test_row_numbers_of_a_rank_column_are_not_figures() -> None:
    answer = (
        "| **Rank** | Country | Growth |\r\n"
        "|:--:|---|---:|\r\n"
        "| 11 | India | 32.6% |\r\n"
        "| **12** | China | 11.8% |\r\n"
        "\n"
        "| # | Value |\n"
        "|---|---|\n"
        "| 13 | 14 |\n"
        "\n"
        "| Value | No. |\n"
        "| --- | --- |\n"
        "| 15 | 16 |\n"
        "\n"
        "| 17 | 18 |\n"
        "| 19 | 20 |\n"
    )
    assert texts(answer) == ["32.6%", "11.8%", "14", "15", "17", "18", "19", "20"]
    # Outer pipes are optional, row by row.
    answer = "| Rank | Value |\n|---|---|\n21 | 22\n| 23 | 24\n25 | 26 |\n"
    assert texts(answer) == ["22", "24", "26"]
    answer = "Value | Rank\n---|---\n| 21 | 22 |\n| 23 | 24\n25 | 26 |\n"
    assert texts(answer) == ["21", "23", "25"]


def test_years_are_not_figures() -> None:
    answer = (
        "From 2000 to 2020 (2000–2020, in the 1990s) it grew by 2,020 people; 1899 and 2101 too."
    )
    assert texts(answer) == ["2,020", "1899", "2101"]


def test_step_numbers_list_markers_and_ranks_are_not_figures() -> None:
    answer = (
        "1. Step 3 loaded the data; steps 4–6 and step 7, 8 and 12 cleaned it.\n"
        "2) See tool call 11.\n"
        "## 10. Results\n"
        "- #12 on the list, the top 20 and the first 15 rows; No. 14\n"
        "11. The total was 4,512.\n"
    )
    assert texts(answer) == ["4,512"]


def test_small_integers_ordinals_and_names_are_not_figures() -> None:
    answer = (
        "The 3 countries; the 21st and 42nd; column x1, Q3, col_12 and H2O; "
        "but 12 rows, 0.5 and 7%."
    )
    assert texts(answer) == ["12", "0.5", "7%"]


def test_dates_times_versions_links_and_footnotes_are_not_figures() -> None:
    answer = (
        "On 2020-01-02 at 14:30:05 (or 3/4/2021, Jan 15, 12 March, 11am) with "
        "pandas 2.2.3, Python 3.11 and version 4.1, per [the data](https://x.org/d/123?p=45)[^17] "
        "and https://example.com/2019/report-77 [12], the 2019-20 season had 1,234 games."
    )
    assert texts(answer) == ["1,234"]


def test_inline_code_that_reads_as_code_is_skipped() -> None:
    answer = (
        "`df.head(10)` and `x = 42` and `rows[12]` and `pd.NA 30` 13 gave `12.5`, "
        "``33.0%`` and `1,234 rows`."
    )
    assert texts(answer) == ["13", "12.5", "33.0%", "1,234"]


def test_fenced_code_in_a_language_is_skipped_but_plain_fences_are_read() -> None:
    answer = (
        "The mean was 12.5.\n"
        "```python\ndf.head(25)\nx = 0.75 * 1000\n```\n"
        "```\nmean    12.5\nrows    1,234\n```\n"
    )
    assert texts(answer) == ["12.5", "12.5", "1,234"]


def test_figures_from_the_question_are_not_counted() -> None:
    question = "Which countries grew by more than 5% or 10 million people between 2000 and 2020?"
    answer = "Three grew by more than 5%: India by 17.5%, Nigeria by 10,000,000 and Chad by 42."
    assert texts(answer, question) == ["17.5%", "42"]
    assert texts(answer) == ["5%", "17.5%", "10,000,000", "42"]


def test_question_years_and_counts_exclude_nothing() -> None:
    question = "Which 5 countries grew most from 2000 to 2020, by more than 2,500 people?"
    answer = "By 5%, 2,000 and 2,020 people; 2,500 too."
    assert texts(answer, question) == ["5%", "2,000", "2,020"]


def test_underscore_emphasis_and_emoji_codes() -> None:
    answer = "_12.5%_ and __1,234__ but not col_2, COVID-19, :100: or :+1:"
    assert texts(answer) == ["12.5%", "1,234"]


def test_the_first_number_of_a_range_takes_the_unit_of_the_second() -> None:
    found = figures("It rose 10–20% to 30 to 40 million, then 15-25 rows.")
    assert [(f.text, f.percent, f.value) for f in found] == [
        ("10", True, 10),
        ("20%", True, 20),
        ("30", False, 30e6),
        ("40 million", False, 40e6),
        ("15", False, 15),
        ("25", False, 25),
    ]
    assert step_of("between 10-20%", "shares: 0.1012, 0.2") == [1, 1]
    assert step_of("between 30 and 40 million", "30214567") == [None, None]


def test_hyphens_between_numbers_are_not_signs() -> None:
    found = figures("Between 10-20 and 30–40 rows; a change of -15.")
    assert [(f.text, f.value) for f in found] == [
        ("10", 10),
        ("20", 20),
        ("30", 30),
        ("40", 40),
        ("-15", -15),
    ]


def test_accounting_negatives_are_plain_numbers() -> None:
    (figure,) = figures("A loss of (3.2) in the year")
    assert (figure.text, figure.value) == ("3.2", 3.2)
    assert step_of("A loss of (3.2).", "net -3.2") == [1]


# --- Matching ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        "1402617695",
        "[1057922733, 1243481564, 1402617695]",
        "India    1,402,617,695",
        "India\t1402617695.0",
        "{'India': np.int64(1402617695)}",
        "total=1402617695\n",
    ],
)
def test_output_formats_match_an_exact_integer(output: str) -> None:
    assert traced("1,402,617,695", output)


def test_separators_come_in_threes() -> None:
    assert not traced("1,234", "x=1,2345")
    assert traced("2,345", "x=1,2345")
    assert texts("1,2345 and 12,34") == ["2345", "12", "34"]


def test_less_precise_output_does_not_trace_a_precise_figure() -> None:
    assert not traced("1,402,617,695", "1.402618e+09")
    assert not traced("1,402,617,695", "1402617694")


@pytest.mark.parametrize(
    ("figure", "output", "match"),
    [
        ("1.4 billion", "1402617695", True),
        ("1.4 billion", "1.402618e+09", True),
        ("1.5 billion", "1402617695", False),
        ("1,400,000,000", "1402617695", True),
        ("1,500,000,000", "1402617695", False),
        ("33.0%", "0.33035", True),
        ("33.04", "33.035", True),
        ("33.04", "33.046", False),
        ("4.70", "4.7", True),
        ("4.7", "4.74999", True),
        ("4.7", "4.75001", False),
        ("4.7", "4.75", True),
        ("4.8", "4.75", True),
        ("2.675", "2.6745", True),
        ("2.675", "2.67449", False),
        ("0.2", "0.15", True),
        ("0.1", "0.15", True),
        ("12.5", "np.float64(12.4999)", True),
        ("12.5", "12.56", False),
        ("1,000,000", "1,000,400", True),
        ("1,000,000", "1,049,000", True),
        ("1,000,000", "1,051,000", False),
        ("1,000", "1,049", True),
        ("1,000", "1,051", False),
        ("1,250", "1,249", False),
    ],
)
def test_rounding(figure: str, output: str, match: bool) -> None:
    assert traced(figure, output) is match


@pytest.mark.parametrize(
    ("figure", "output", "match"),
    [
        ("4.7%", "0.0472", True),
        ("4.7%", "4.72", True),
        ("4.7%", "4.72%", True),
        ("4.7%", "0.0476", False),
        ("4.7%", "0.472", False),
        ("4.7", "0.0472", False),
        ("12 percent", "0.1204", True),
        ("33.0%", "rate    0.330\n", True),
    ],
)
def test_percentages(figure: str, output: str, match: bool) -> None:
    assert traced(figure, output) is match


@pytest.mark.parametrize(
    ("figure", "output", "match"),
    [
        ("-3.2", "-3.2", True),
        ("−3.2", "-3.2", True),
        ("-3.2", "−3.2", True),
        ("-3.2", "3.2", False),
        ("+3.2", "-3.2", False),
        ("+3.2", "3.2", True),
        ("3.2", "-3.2", True),
        ("-3.2 million", "-3214567", True),
        ("-3.2 million", "3214567", False),
        ("-4.7%", "-0.047", True),
        ("-4.7%", "0.047", False),
    ],
)
def test_negative_numbers(figure: str, output: str, match: bool) -> None:
    assert traced(figure, output) is match


@pytest.mark.parametrize(
    ("figure", "output", "match"),
    [
        ("3.2 million", "3214567", True),
        ("3.2 million", "3,249,999", True),
        ("3.2 million", "3,251,000", False),
        ("3.2 million", "population (millions): 3.2", True),
        ("3.2M", "3214567", True),
        ("$12k", "12345.67", True),
        ("$12k", "12,600", False),
        ("1.4bn", "1.402618e+09", True),
        ("350 thousand", "349,612", True),
        ("3.2 million", "$3.2M", True),
        ("3.2 million", "3.2 billion", False),
    ],
)
def test_scale_words(figure: str, output: str, match: bool) -> None:
    assert traced(figure, output) is match


def test_a_list_without_spaces_still_matches_its_members() -> None:
    assert traced("100,200,300", "[100,200,300]")
    assert traced("200,000", "[100,200,300]") is False
    assert step_of("It was 200.5 and then 300 people.", "[100,200,300]") == [None, 1]


def test_a_figure_no_step_printed_is_not_found() -> None:
    answer = POPULATION_ANSWER.replace("350,001,234", "350,001,999")
    items = trace(answer, [Source(1, POPULATION_OUTPUT)])
    assert items[0] == Trace(figures(answer)[0], None, "")
    assert [item.step for item in items[1:]] == [1, 1]


def test_code_is_not_searched() -> None:
    assert step_of("The cap is 1,234.", "") == [None]
    items = trace("The cap is 1,234.", [Source(1, "done", code="cap = 1234\nprint('done')")])
    assert items[0].step is None


def test_the_earliest_step_wins_whatever_the_order_given() -> None:
    sources = [Source(3, "x 42.0"), Source(1, "rows 651"), Source(2, "mean\n  42.04 \n")]
    (item,) = trace("The mean is 42.0.", sources)
    assert (item.step, item.line) == (2, "42.04")


def test_the_line_is_the_one_holding_the_earliest_match() -> None:
    output = "header\nfirst: 7.5 and 12.5\nsecond: 12.5\n"
    (item,) = trace("It was 12.5.", [Source(1, output)])
    assert item.line == "first: 7.5 and 12.5"


def test_the_earliest_line_wins_whichever_value_is_closer() -> None:
    output = "a 12.54\nb 12.5\nc 12.46\n"
    (item,) = trace("It was 12.5.", [Source(1, output)])
    assert item.line == "a 12.54"
    (item,) = trace("It was 12.5.", [Source(1, "c 12.46\na 12.54\n")])
    assert item.line == "c 12.46"


def test_a_long_line_is_clipped_around_the_figure() -> None:
    values = list(range(100000, 130000))
    output = json.dumps(values)
    (item,) = trace("It was 123,456.", [Source(1, output)])
    assert item.step == 1
    assert len(item.line) == 200
    assert "123456" in item.line
    assert item.line.startswith("…") and item.line.endswith("…")
    (first,) = trace("It was 100,001.", [Source(1, output)])
    assert first.line.startswith("[100000, 100001") and len(first.line) == 200


def test_odd_numbers_do_not_break_the_matcher() -> None:
    odd = "1e400 people, 1e-400 of them, " + "9" * 500 + " rows, 12." + "5" * 400
    assert summary(trace(odd, [Source(1, odd)])) == "4 figures, all traced to step 1"
    assert figures("`" * 3000 + " 12.5 " + "`" * 3000)[0].text == "12.5"


def test_no_figures_no_sources() -> None:
    assert trace("Done in step 3, see the top 5.", [Source(1, "5")]) == []
    assert trace("It was 1,234.", []) == [Trace(figures("It was 1,234.")[0], None, "")]


# --- Summary ---------------------------------------------------------------------------


def traces_at(*steps: int | None, texts: Sequence[str] = ()) -> list[Trace]:
    names = list(texts) or [f"{n + 11}" for n in range(len(steps))]
    return [
        Trace(Figure(name, float(n), 0, False, 0, len(name)), step, "" if step is None else "x")
        for n, (name, step) in enumerate(zip(names, steps, strict=True))
    ]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ((), ""),
        ((3,), "1 figure, traced to step 3"),
        ((3, 3), "2 figures, all traced to step 3"),
        ((2, 3, 4, 2, 4), "5 figures, all traced to steps 2–4"),
        ((3, 2), "2 figures, all traced to steps 2–3"),
        ((2, 4, 7, 4), "4 figures, all traced to steps 2, 4 and 7"),
        ((7, 2), "2 figures, all traced to steps 2 and 7"),
    ],
)
def test_summary_when_all_are_traced(steps: tuple[int, ...], expected: str) -> None:
    assert summary(traces_at(*steps)) == expected


def test_summary_when_some_are_not_found() -> None:
    assert (
        summary(traces_at(2, None, 3, texts=["12", "3.2 million", "4.7%"]))
        == "2 of 3 figures traced; not found: 3.2 million"
    )
    assert summary(traces_at(None, texts=["12"])) == "0 of 1 figure traced; not found: 12"
    assert (
        summary(traces_at(None, 1, None, texts=["a", "b", "c"]))
        == "1 of 3 figures traced; not found: a and c"
    )
    assert (
        summary(traces_at(None, None, None, texts=["a", "b", "c"]))
        == "0 of 3 figures traced; not found: a, b and c"
    )
    assert (
        summary(traces_at(None, None, 1, None, None, None, texts="abcdef"))
        == "1 of 6 figures traced; not found: a, b, d and 2 more"
    )


def test_summary_lists_a_figure_written_twice_once() -> None:
    assert (
        summary(traces_at(None, None, 2, texts=["12.5", "12.5", "7.5"]))
        == "1 of 3 figures traced; not found: 12.5"
    )


def test_summary_of_a_real_trace() -> None:
    answer = POPULATION_ANSWER + " That is 33.0%, about 3.2 million a year."
    sources = [Source(1, "651 rows"), Source(2, POPULATION_OUTPUT), Source(3, "0.3303")]
    assert summary(trace(answer, sources)) == ("4 of 5 figures traced; not found: 3.2 million")
    sources.append(Source(4, "per year: 3,214,567"))
    assert summary(trace(answer, sources)) == "5 figures, all traced to steps 2–4"


# --- Speed -----------------------------------------------------------------------------


def test_a_large_output_and_answer_are_traced_quickly() -> None:
    rng = random.Random(7)
    rows = [
        f"{rng.randrange(10**9):>12,} {rng.random():.6f} {rng.random() * 1e6:.2f}"
        for _ in range(7000)
    ]
    output = "\n".join(rows)
    assert len(output) > 200_000
    picked = rows[::60]
    sentences = [
        f"Row value {row.split()[0]} and share {float(row.split()[1]):.1%}." for row in picked
    ]
    answer = " ".join(sentences)
    answer += " " * max(0, 5000 - len(answer))
    assert len(answer) >= 5000
    started = time.monotonic()
    items = trace(answer, [Source(1, "warm-up 1"), Source(2, output)])
    elapsed = time.monotonic() - started
    assert len(items) == 2 * len(picked)
    assert all(item.step == 2 for item in items)
    assert elapsed < 5


def test_a_run_of_backticks_is_read_in_linear_time() -> None:
    started = time.monotonic()
    assert texts("`" * 50_000 + " 12.5") == ["12.5"]
    assert time.monotonic() - started < 5
