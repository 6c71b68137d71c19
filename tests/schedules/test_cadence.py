"""Cron arithmetic in the asker's time zone: firings at the wall-clock time asked across
daylight-saving changes, the schedule in words, and what cannot make a schedule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.schedules.cadence import Cadence, CadenceError, cadence

HOUR = 3600


def firings(c: Cadence, start: datetime, n: int) -> list[str]:
    out, at = [], start
    for _ in range(n):
        at = c.next_after(at)
        out.append(at.astimezone(c.tz).isoformat())
    return out


def test_a_weekly_firing_keeps_its_wall_clock_time_across_the_autumn_change() -> None:
    weekly = Cadence("0 9 * * 1", "Europe/Warsaw")
    assert firings(weekly, datetime(2026, 10, 18, tzinfo=UTC), 2) == [
        "2026-10-19T09:00:00+02:00",
        "2026-10-26T09:00:00+01:00",
    ]
    assert firings(weekly, datetime(2026, 3, 22, tzinfo=UTC), 2) == [
        "2026-03-23T09:00:00+01:00",
        "2026-03-30T09:00:00+02:00",
    ]


def test_a_time_the_spring_change_skips_fires_at_the_first_time_that_exists() -> None:
    daily = Cadence("30 2 * * *", "Europe/Warsaw")
    assert firings(daily, datetime(2026, 3, 28, 12, tzinfo=UTC), 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


@pytest.mark.parametrize(
    ("zone", "expression", "start", "expected"),
    [
        (
            "Europe/Warsaw",
            "30 2 * * *",
            datetime(2026, 10, 24, 12, tzinfo=UTC),
            ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"],
        ),
        (
            "America/New_York",
            "30 1 * * *",
            datetime(2026, 10, 31, 12, tzinfo=UTC),
            ["2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"],
        ),
    ],
)
def test_a_time_the_autumn_change_repeats_fires_once(
    zone: str, expression: str, start: datetime, expected: list[str]
) -> None:
    assert firings(Cadence(expression, zone), start, 2) == expected


def test_a_missed_firing_is_the_latest_one_due() -> None:
    hourly = Cadence("0 * * * *", "Europe/Warsaw")
    down = datetime(2026, 12, 3, 0, 10, tzinfo=UTC)
    back = datetime(2026, 12, 3, 5, 30, tzinfo=UTC)
    assert hourly.latest_due(down, back) == datetime(2026, 12, 3, 5, tzinfo=UTC)
    assert hourly.latest_due(back, back) is None


def test_the_schedule_in_words_names_the_zone_and_the_next_firing() -> None:
    weekly = cadence("0 9 * * 1", "Europe/Warsaw", now=datetime(2026, 12, 3, tzinfo=UTC),
                     min_interval_s=HOUR)  # fmt: skip
    assert weekly.words(datetime(2026, 12, 3, tzinfo=UTC)) == (
        "At 09:00, only on Monday, Europe/Warsaw; next Mon 7 Dec, 09:00"
    )


@pytest.mark.parametrize(
    ("expression", "zone", "said"),
    [
        ("* * * * *", "UTC", "fires every minute; a schedule may fire at most every hour"),
        ("*/30 * * * *", "UTC", "every 30 minutes"),
        ("0 9 * *", "UTC", "five cron fields"),
        ("0 0 9 * * 1", "UTC", "five cron fields"),
        ("@weekly", "UTC", "five cron fields"),
        ("0 9 31 2 *", "UTC", "can fire"),
        ("0 25 * * *", "UTC", "can fire"),
        ("0 9 * * 1", "Mars/Olympus", "Unknown time zone"),
    ],
)
def test_what_cannot_make_a_schedule_says_why(expression: str, zone: str, said: str) -> None:
    with pytest.raises(CadenceError, match=said):
        cadence(expression, zone, now=datetime(2026, 12, 3, tzinfo=UTC), min_interval_s=HOUR)


def test_the_minimum_interval_may_be_lowered() -> None:
    made = cadence("* * * * *", "UTC", now=datetime(2026, 12, 3, tzinfo=UTC), min_interval_s=60)
    assert made.shortest_gap_s(datetime(2026, 12, 3, tzinfo=UTC)) == 60
