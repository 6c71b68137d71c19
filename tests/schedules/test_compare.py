"""A firing's figures against the last firing's, position by position."""

from __future__ import annotations

from bot.schedules.compare import changes, note


def test_changed_figures_are_named_with_their_change() -> None:
    before = ["412", "1,402,617,695", "6.1%", "India"]
    after = ["437", "1,402,617,695", "5.0%", "India"]
    assert changes(before, after) == ["412 → 437 (+6.1%)", "6.1% → 5.0% (−18.0%)"]
    assert note(before, after, "Mon 30 Nov") == (
        "Since the last firing (Mon 30 Nov): 412 → 437 (+6.1%); 6.1% → 5.0% (−18.0%)."
    )


def test_the_same_figures_say_so_and_no_figures_say_nothing() -> None:
    assert note(["1", "2"], ["1", "2"], "Mon 30 Nov") == (
        "The figures are as they were at the last firing (Mon 30 Nov)."
    )
    assert note([], ["1"], "Mon 30 Nov") == ""


def test_a_percentage_is_not_compared_with_a_count() -> None:
    assert changes(["5%", "0"], ["7", "3"]) == ["0 → 3"]
