"""Disk partitioning by linear programming from a dynamic schema (Bareon design)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apportion.contracts.partition import PartitionJob, PartitionResult
    from apportion.engine import Context


def solve(job: PartitionJob, ctx: Context) -> PartitionResult:
    raise NotImplementedError("partition engine: work in progress")
