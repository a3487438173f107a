"""Disk partitioning by linear programming from a dynamic schema (Bareon design).

The seed's pipeline, one module per stage:

* :mod:`.schema` — structure: spaces, vg membership and disks as records (checked
  before, by :mod:`apportion.contracts.partition_checks`, named by the kind's registry
  entry);
* :mod:`.dynamic` — ``yaql=…`` values evaluated in one bounded batch, then typed and
  checked (``rejected`` with the path of the field);
* :mod:`.model` — the numbers: whole-MiB bounds, fair-share groups, the objective;
* :mod:`.feasibility` — an infeasible schema explained (``infeasible``);
* :mod:`.lp` — the reference LP, solved by HiGHS;
* :mod:`.integer` — whole MiB satisfying every constraint exactly;
* :mod:`.convert` — the static schema with volume groups and partitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apportion.errors import Infeasible
from apportion.partition import convert, dynamic, feasibility, integer, lp, model, schema

if TYPE_CHECKING:
    from apportion.context import Context
    from apportion.contracts.partition import PartitionJob


def solve(job: PartitionJob, ctx: Context) -> convert.Result:
    """Lay the job's spaces out on its disks in whole MiB.

    ``job`` is one that its kind's check (:mod:`apportion.contracts.partition_checks`)
    found valid; its values (literal or ``yaql=``) are checked here, once evaluated.

    The answer is plain JSON data shaped as the contract's ``PartitionResult``.
    """
    limits = ctx.limits
    parsed = schema.parse(job)
    resolved = dynamic.resolve(parsed, limits)
    problem = model.build(parsed.disks, resolved.spaces)
    reason = feasibility.diagnose(problem)
    if reason is not None:
        raise reason
    relaxed = lp.solve(problem)
    if relaxed is None:  # the diagnosis is complete, so only numerical trouble lands here
        raise Infeasible(
            "no allocation satisfies every min_size, max_size and size together with the "
            "fair-share weights on these disks; lower the minimum sizes or add disk space"
        )
    whole = integer.solve(problem, relaxed, time_limit=limits.partition_solver_seconds)
    return convert.to_result(parsed, resolved, problem, whole.x)


__all__ = ["solve"]
