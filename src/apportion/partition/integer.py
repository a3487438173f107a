"""From the LP's rational answer to whole MiB that satisfy every constraint exactly.

Upstream floors each LP value, which can break a constraint by 1 MiB, leave up to one
MiB per space unallocated, and turn 24.999999999999996 into 24. Here:

1. **Vertex check.** Without fair-share rows the constraint matrix is the incidence
   matrix of a bipartite graph (every ``x[d,s]`` is in one space row and one disk row),
   which is totally unimodular: with whole-MiB bounds every vertex HiGHS returns is
   integral up to float noise. We round, refill ``unallocated`` and verify every
   constraint in exact integer arithmetic. If that holds, the point is optimal (it
   scores the LP optimum) and no MILP is run — the common case.

2. **Exact shares.** Otherwise (fair shares with a ratio that the LP met with
   fractions, e.g. 2:1 on 100 MiB → 66.67 + 33.33) only one multiplier per group must
   become whole: ``y_s = W_s · k_g`` (W coprime integer weights). :mod:`.shares` finds
   the best whole ``k`` by branch and bound; with the multipliers fixed the rest is
   again a bipartite transportation problem, so its vertex is whole MiB and the best
   layout (order, best_with_disks) for those totals.

3. **Cost of exactness.** Exact ratios can only move in steps of ΣW MiB. The rows of
   the reference table are binding: weights 2:1 on 100 MiB give 66 + 33 with 1 MiB
   unavoidably unallocated. But weights such as 1 : 1.0001 (W = 10000 : 10001) would
   leave whole disks empty. So exact shares are kept when they cost at most 1 MiB per
   fair-shared space over the LP optimum (the reference's own worst case for
   flooring), and otherwise, or when no exact split exists (min 11 at 2:3 on 28 MiB),
   every member of a group is held within 1 MiB of its exact share instead:
   ``|y_s − W_s·t_g| ≤ 1`` with a continuous ``t_g``, a MILP with an integer total
   per member (scipy's ``milp``), whose answer is then *polished*: the LP with those
   totals fixed, for the best order of spaces on disks (the MILP's gap tolerance is
   coarser than the tiny order coefficients). That relaxed program is always feasible
   when the LP is (round the LP's totals down).

Every final answer is verified exactly; a failed verification is an engine bug and
raises, it is never returned.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.optimize
import scipy.sparse

from apportion.partition import lp, shares
from apportion.partition.lp import LpSolution, Rows
from apportion.partition.model import FloatArray, IntArray, Problem

# How far an LP value may sit from a whole MiB and still be read as that MiB.
INTEGRAL = 1e-6
# No relative gap (HiGHS's default 1e-4 of an objective of ~2 per MiB could leave
# thousands of MiB unallocated on big disks): the search closes at HiGHS's absolute gap
# of 1e-6, far below the ≥ 1 that one more allocated MiB is worth.
_MIP_REL_GAP = 0.0


@dataclass(frozen=True, slots=True, eq=False)
class IntegerSolution:
    x: IntArray  # (D·S,) whole MiB, unallocated included
    method: str  # "vertex" | "exact" | "within-1"


def totals(problem: Problem, x: IntArray | FloatArray) -> FloatArray:
    """Σ_d x[d,s] for every space, ``unallocated`` last."""
    grid = np.asarray(x, dtype=np.float64).reshape(problem.disks, problem.width)
    out: FloatArray = grid.sum(axis=0)
    return out


def violations(problem: Problem, x: IntArray, *, exact_shares: bool) -> list[str]:
    """Every broken constraint of an integer layout, checked in exact arithmetic."""
    out = []
    grid = x.reshape(problem.disks, problem.width)
    if (grid < 0).any():
        out.append("negative size")
    if (grid.sum(axis=1) != problem.capacity).any():
        out.append("a disk's spaces do not add up to its size")
    size = grid[:, : problem.real].sum(axis=0)
    if (size < problem.min_size).any():
        out.append("a space below its min_size")
    if (size > problem.max_size).any():
        out.append("a space above its max_size")
    for group in problem.groups:
        sizes = [int(size[s]) for s in group.members]
        if exact_shares:
            lead, w_lead = sizes[0], group.weights[0]
            if any(v * w_lead != lead * w for v, w in zip(sizes, group.weights, strict=True)):
                out.append(f"fair shares of {problem.spaces[group.members[0]].id!r} broken")
        else:
            low = max(Fraction(v - 1, w) for v, w in zip(sizes, group.weights, strict=True))
            high = min(Fraction(v + 1, w) for v, w in zip(sizes, group.weights, strict=True))
            if low > high:
                out.append(f"shares of {problem.spaces[group.members[0]].id!r} off by > 1 MiB")
    return out


def _round(problem: Problem, x: FloatArray) -> IntArray | None:
    """Whole MiB if every value is one up to float noise, ``unallocated`` refilled."""
    rounded = np.rint(x)
    if len(x) and np.abs(x - rounded).max() > INTEGRAL:
        return None
    grid = rounded.astype(np.int64).reshape(problem.disks, problem.width)  # a fresh array
    grid[:, problem.real] = problem.capacity - grid[:, : problem.real].sum(axis=1)
    return grid.ravel()


def from_vertex(problem: Problem, lp: LpSolution) -> IntegerSolution | None:
    if problem.variables <= PLAIN_VARIABLES:
        grid = round_plain(problem, lp.x.tolist())
        if grid is None or violations_plain(problem, grid):
            return None
        return IntegerSolution(np.array(grid, dtype=np.int64).ravel(), "vertex")
    x = _round(problem, lp.x)
    if x is None or violations(problem, x, exact_shares=True):
        return None
    return IntegerSolution(x, "vertex")


# Up to this many variables the vertex check runs on Python lists: a numpy call costs
# about a microsecond whatever the size of its array, and the check makes a dozen, more
# than the arithmetic of a small layout; past it numpy's loops win. Both paths give the
# same answer (a property test compares them).
PLAIN_VARIABLES = 64


def round_plain(problem: Problem, x: list[float]) -> list[list[int]] | None:
    """:func:`_round` on a list: the rows of the grid, or None.

    Whole-list passes (``map`` over builtins) rather than a loop with a test per value:
    on a small layout the loop's bytecode is most of the check's cost.
    """
    try:
        rounded = list(map(round, x))  # half to even, as np.rint; an int per float
    except (OverflowError, ValueError):  # inf, nan
        return None
    if max(map(abs, map(operator.sub, x, rounded)), default=0.0) > INTEGRAL:
        return None
    width, real = problem.width, problem.real
    grid = [rounded[d * width : (d + 1) * width] for d in range(problem.disks)]
    for row, capacity in zip(grid, problem.capacity.tolist(), strict=True):
        row[real] = capacity - sum(row[:real])
    return grid


def violations_plain(problem: Problem, grid: list[list[int]]) -> list[str]:
    """:func:`violations` with exact shares, on the rows of a grid of ints."""
    out = []
    if min(map(min, grid)) < 0:
        out.append("negative size")
    if list(map(sum, grid)) != problem.capacity.tolist():
        out.append("a disk's spaces do not add up to its size")
    # column totals, unallocated dropped
    size = list(map(sum, zip(*grid, strict=True)))[: problem.real]
    if any(map(operator.lt, size, problem.min_size.tolist())):
        out.append("a space below its min_size")
    if any(map(operator.gt, size, problem.max_size.tolist())):
        out.append("a space above its max_size")
    for group in problem.groups:
        sizes = [size[s] for s in group.members]
        lead, w_lead = sizes[0], group.weights[0]
        if any(v * w_lead != lead * w for v, w in zip(sizes, group.weights, strict=True)):
            out.append(f"fair shares of {problem.spaces[group.members[0]].id!r} broken")
    return out


def _member_columns(problem: Problem) -> tuple[IntArray, IntArray, FloatArray]:
    """(space, group, weight) of every group member, groups in order."""
    members = [s for g in problem.groups for s in g.members]
    group_of = [j for j, g in enumerate(problem.groups) for _ in g.members]
    weights = [float(w) for g in problem.groups for w in g.weights]
    return (
        np.array(members, dtype=np.int64),
        np.array(group_of, dtype=np.int64),
        np.array(weights, dtype=np.float64),
    )


def _within_one_rows(problem: Problem) -> tuple[scipy.sparse.coo_array, int, int]:
    """``Σ_d x[d,s] − y_m = 0`` and ``−1 ≤ y_m − W_s·t_g ≤ 1`` per member m.

    Columns after x: an integer total y_m per member, then a continuous t_g per group.
    """
    n = problem.variables
    members, group_of, weights = _member_columns(problem)
    m, g = len(members), len(problem.groups)
    sum_rows, sum_cols = lp.sum_over_disks(problem, members)
    rows = np.concatenate([sum_rows, np.arange(m), m + np.arange(m), m + np.arange(m)])
    cols = np.concatenate([sum_cols, n + np.arange(m), n + np.arange(m), n + m + group_of])
    values = np.concatenate([np.ones(len(sum_rows)), -np.ones(m), np.ones(m), -weights])
    return scipy.sparse.coo_array((values, (rows, cols)), shape=(2 * m, n + m + g)), m, g


def _milp_within_one(problem: Problem, upper: Rows, *, time_limit: float) -> FloatArray | None:
    """Whole-MiB totals of the group members (groups in order), each within 1 MiB of
    its exact share, or None. scipy's MILP (HiGHS): rare, and only when exact shares
    cost too much or do not exist."""
    n = problem.variables
    shares_matrix, m, g = _within_one_rows(problem)
    upper_matrix = upper.matrix
    widened = scipy.sparse.hstack(
        [upper_matrix, scipy.sparse.csr_array((upper_matrix.shape[0], m + g))]
    )
    result = scipy.optimize.milp(
        -np.concatenate([problem.objective, np.zeros(m + g)]),
        constraints=scipy.optimize.LinearConstraint(
            scipy.sparse.vstack([widened, shares_matrix]).tocsr(),
            np.concatenate([np.full(upper_matrix.shape[0], -np.inf), np.zeros(m), -np.ones(m)]),
            np.concatenate([upper.rhs, np.zeros(m), np.ones(m)]),
        ),
        integrality=np.concatenate([np.zeros(n), np.ones(m), np.zeros(g)]),
        bounds=scipy.optimize.Bounds(0, np.inf),
        options={"mip_rel_gap": _MIP_REL_GAP, "time_limit": time_limit},
    )
    if result.x is None:
        if result.status == 1:  # time or node limit before any whole-MiB answer
            raise shares.too_complex(time_limit)
        return None
    members, _, _ = _member_columns(problem)
    grid = np.asarray(result.x[:n], dtype=np.float64).reshape(problem.disks, problem.width)
    member_totals: FloatArray = np.rint(grid[:, members].sum(axis=0))
    return member_totals


def _polish(problem: Problem, upper: Rows, member_totals: FloatArray) -> IntArray | None:
    """The reference LP with the group members' totals fixed to whole MiB.

    Without fair-share rows the matrix is totally unimodular, so HiGHS's vertex is
    integral, and it is the best layout (order, best_with_disks) for those totals.
    """
    members, _, _ = _member_columns(problem)
    rows, cols = lp.sum_over_disks(problem, members)
    fixed = Rows(rows, cols, np.ones(len(rows)), (len(members), problem.variables), member_totals)
    x = lp.solve_rows(problem, upper, fixed)
    return None if x is None else _round(problem, x)


def _unallocated(problem: Problem, x: IntArray) -> int:
    return int(totals(problem, x)[problem.real])


def solve(problem: Problem, relaxed: LpSolution, *, time_limit: float) -> IntegerSolution:
    """Whole MiB for every variable; see the module docstring for the method."""
    vertex = from_vertex(problem, relaxed)
    if vertex is not None:
        return vertex
    lp_unallocated = float(problem.capacity.sum()) - float(
        totals(problem, relaxed.x)[: problem.real].sum()
    )
    shared = sum(len(g.members) for g in problem.groups)
    layout = shares.exact(problem, relaxed, time_limit=time_limit)
    x = None if layout is None else _round(problem, layout)
    if (
        x is not None
        and not violations(problem, x, exact_shares=True)
        and _unallocated(problem, x) - lp_unallocated <= shared + INTEGRAL
    ):
        return IntegerSolution(x, "exact")
    upper = lp.upper_rows(problem)
    within = _milp_within_one(problem, upper, time_limit=time_limit)
    if within is not None:
        x = _polish(problem, upper, within)
        if x is not None and not violations(problem, x, exact_shares=False):
            return IntegerSolution(x, "within-1")
    raise RuntimeError("no verified whole-MiB layout found for a feasible partition LP")
