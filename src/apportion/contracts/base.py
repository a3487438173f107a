"""Shared building blocks of the wire contract (SPEC.md §2)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field


class WireModel(BaseModel):
    """Base of every wire model: immutable, snake_case with camelCase aliases accepted.

    Unknown fields are ignored rather than rejected: producers such as Candlepin send
    whole server objects (href, owner, created …) and a newer producer may send fields
    this version does not know. Each model that must keep extra keys (a partition
    space's ``mount`` and friends) opts in with ``extra="allow"``.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="ignore",
        populate_by_name=True,
        str_strip_whitespace=False,
        allow_inf_nan=False,
    )


def alias(*names: str) -> Any:
    """Accept each of ``names`` on input (snake_case first, then camelCase aliases)."""
    return AliasChoices(*names)


def finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    return value


FiniteFloat = Annotated[float, BeforeValidator(finite)]


class JobBase(WireModel):
    """Fields every job has. ``job_id`` is the idempotency key (defaults to the task id)."""

    job_id: str | None = Field(default=None, min_length=1, max_length=256)
