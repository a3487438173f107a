"""A toy job kind, added the way a deployment adds one: one registry entry and an engine.

Loaded by name (``APPORTION_KIND_MODULES='["tests.support.toy_kind"]'``) or imported.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from typing_extensions import TypedDict  # pydantic needs it for schemas on Python 3.11

from apportion.contracts.base import JobBase
from apportion.kinds import JobKind, register


class ToySumJob(JobBase):
    numbers: list[int] = Field(min_length=1, max_length=100)


class ToySumResult(TypedDict):
    total: int


def solve(job: ToySumJob, ctx: Any) -> ToySumResult:
    return {"total": sum(job.numbers)}


TOY_SUM = register(
    JobKind(
        name="toy_sum",
        summary="the sum of some numbers",
        job=ToySumJob,
        result=ToySumResult,
        solver="tests.support.toy_kind:solve",
        queue="toy",
        soft_time_limit=5,
        time_limit=10,
    )
)
