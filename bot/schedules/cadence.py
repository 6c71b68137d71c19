"""When a schedule fires: a five-field cron expression read in the asker's time zone (the IANA
name Slack gives, never an offset), every fire time kept in UTC.

Across daylight-saving changes the firings land at the wall-clock time asked: a time the
spring change skips fires at the first time that exists (02:30 → 03:00), and a time the
autumn change repeats fires once, at its first occurrence, as cron does for fixed-time jobs.
croniter does the arithmetic; cron-descriptor says the schedule in words.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cron_descriptor import ExpressionDescriptor, FormatError, Options
from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from bot.errors import BotError

FIELDS = 5
SEARCH_YEARS = 5  # an expression with no firing within it is refused
GAP_SAMPLES = 64  # consecutive firings looked at for the shortest interval


class CadenceError(BotError):
    """An expression or time zone that cannot make a schedule; the message says why."""


@dataclass(frozen=True)
class Cadence:
    expression: str
    zone: str  # IANA, e.g. Europe/Warsaw

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def next_after(self, when: datetime) -> datetime:
        """The first firing strictly after `when`, in UTC."""
        local = when.astimezone(self.tz)
        cron = croniter(self.expression, local, max_years_between_matches=SEARCH_YEARS)
        while True:
            fire: datetime = cron.get_next(datetime)
            if not _repeats_wall_time(fire, self.tz):
                return fire.astimezone(UTC)

    def latest_due(self, after: datetime, now: datetime) -> datetime | None:
        """The latest firing in (after, now]: the one a bot that was down runs, late, once
        (None: none was missed)."""
        last, fire = None, self.next_after(after)
        while fire <= now:
            last, fire = fire, self.next_after(fire)
        return last

    def shortest_gap_s(self, start: datetime) -> float:
        """The shortest time between consecutive firings from `start` on."""
        fires = [self.next_after(start)]
        for _ in range(GAP_SAMPLES):
            fires.append(self.next_after(fires[-1]))
        return min((b - a).total_seconds() for a, b in itertools.pairwise(fires))

    def words(self, now: datetime) -> str:
        """The schedule as people read it: "At 09:00, only on Monday, Europe/Warsaw; next
        Mon 7 Dec"."""
        options = Options(locale_code="en_US", use_24hour_time_format=True)
        said = ExpressionDescriptor(self.expression, options).get_description()
        upcoming = self.next_after(now).astimezone(self.tz)
        day = f"{upcoming:%a} {upcoming.day} {upcoming:%b}"
        if upcoming.year != now.astimezone(self.tz).year:
            day += f" {upcoming.year}"
        return f"{said}, {self.zone}; next {day}, {upcoming:%H:%M}"


def cadence(expression: str, zone: str, *, now: datetime, min_interval_s: float) -> Cadence:
    """A checked cadence: five fields croniter and cron-descriptor read alike, a time zone
    that exists, a firing within the search window, and no two firings closer than
    `min_interval_s`."""
    expression = " ".join(expression.split())
    if len(expression.split(" ")) != FIELDS or expression.startswith("@"):
        raise CadenceError(
            f"A schedule takes five cron fields (minute hour day month weekday), as in "
            f"'0 9 * * 1'; {expression!r} is not that."
        )
    if not croniter.is_valid(expression, strict=True):
        raise CadenceError(f"{expression!r} is not a cron expression that can fire.")
    try:
        made = Cadence(expression, zone)
        made.tz  # noqa: B018 - an unknown zone fails here
    except (ZoneInfoNotFoundError, ValueError):
        raise CadenceError(f"Unknown time zone {zone!r}.") from None
    try:
        ExpressionDescriptor(expression, Options(locale_code="en_US")).get_description()
        gap = made.shortest_gap_s(now)
    except (CroniterBadCronError, CroniterBadDateError, FormatError):
        raise CadenceError(f"{expression!r} never fires within {SEARCH_YEARS} years.") from None
    if gap < min_interval_s:
        raise CadenceError(
            f"{expression!r} fires every {_duration(gap)}; a schedule may fire at most "
            f"every {_duration(min_interval_s)}."
        )
    return made


def _repeats_wall_time(fire: datetime, tz: ZoneInfo) -> bool:
    """Whether `fire` is the second occurrence of a wall time the autumn change repeats."""
    return fire.fold == 1 and fire.replace(fold=0).utcoffset() != fire.utcoffset()


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        hours = int(seconds // 3600)
        return "hour" if hours == 1 else f"{hours} hours"
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return "minute" if minutes == 1 else f"{minutes} minutes"
    return f"{seconds:g} s"
