"""Scheduled analyses: how often they may fire, how many there may be, who else may change
them."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ScheduleSettings(BaseModel):
    schedule_min_interval_s: int = Field(
        default=3600,
        ge=60,
        description=(
            "the shortest time between two firings of one schedule (hourly by default; down "
            "to 60 s for tests and operators who want it)"
        ),
    )
    schedule_tick_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "how often each replica looks for schedules due (a firing is at most that late)"
        ),
    )
    schedules_per_channel: int = Field(
        default=20, ge=0, description="schedules one channel may hold (proposed ones included)"
    )
    schedules_per_workspace: int = Field(
        default=200, ge=0, description="schedules one workspace may hold"
    )
    schedule_editors: str = Field(
        default="",
        description=(
            "user ids (comma-separated) who may change or delete any schedule, beside its owner"
        ),
    )
