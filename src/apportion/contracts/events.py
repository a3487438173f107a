"""launch_outcome event (SPEC.md §2.4) and the result-stream entry."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apportion.contracts.base import JobBase


class LaunchOutcomeJob(JobBase):
    event_id: str = Field(min_length=1, max_length=256)
    account: str = Field(min_length=1, max_length=256)
    outcome: Literal["failed", "succeeded"]
    at: datetime
    reason: str | None = Field(None, max_length=4096)


class LaunchOutcomeResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    event_id: str
    account: str
    outcome: Literal["failed", "succeeded"]
    recorded: bool = Field(description="false when this event_id was already recorded")
    failures_in_window: int | None = None
