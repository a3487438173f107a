"""launch_outcome event (docs/contract.md#launch_outcome) and the result-stream entry."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apportion.contracts.base import JobBase, JobId


class LaunchOutcomeJob(JobBase):
    """A launch attempt's outcome. ``job_id`` names the launch_select job it reports on;
    ``event_id`` is this event's idempotency key."""

    event_id: JobId
    account: str = Field(min_length=1, max_length=256)
    outcome: Literal["failed", "succeeded"]
    # Optional so that a producer reporting as it happens sends no clock of its own, and
    # a recorded example never ages out of the failure history (issue 31).
    at: datetime | None = Field(
        None,
        description="when it happened (ISO 8601); omitted or null: the worker's clock when "
        "it takes the event",
    )
    reason: str | None = Field(None, max_length=4096)


class LaunchOutcomeResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    event_id: str
    account: str
    outcome: Literal["failed", "succeeded"]
    at: datetime
    job_id: str | None = None
    recorded: bool | None = Field(
        description="true: recorded now; false: not recorded (see `skipped`); "
        "null: no failure-history store (apportion solve)"
    )
    skipped: Literal["already_recorded", "outside_retention"] | None = Field(
        None,
        description="why `recorded` is false: this event_id was recorded before, or the "
        "failure is older than the failure history keeps (APPORTION_FAILURE_RETENTION_HOURS), "
        "so it would never count",
    )
