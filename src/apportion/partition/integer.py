"""From the LP's rational answer to whole MiB that satisfy every constraint exactly.

Upstream floors each LP value, which can break a constraint by 1 MiB, leave up to one
MiB per space unallocated, and turn 24.999999999999996 into 24. Here:

1. **Vertex check.** Without fair-share rows the constraint matrix is the incidence
   matrix of a bipartite graph (every ``x[d,s]`` is in one space row and one disk row),
   which is totally unimodular: with whole-MiB bounds every vertex HiGHS returns is
   integral up to float noise. We round, refill ``unallocated`` and verify every
   constraint in exact integer arithmetic. If that holds, the point is optimal (it
   scores the LP optimum) and no MILP is run — the common case.

2. **MILP on the totals.** Otherwise (fair shares with a ratio that the LP met with
   fractions, e.g. 2:1 on 100 MiB → 66.67 + 33.33) we solve a mixed-integer program with
   ``scipy.optimize.milp`` (HiGHS) in which only the per-space totals ``y_s`` and one
   multiplier ``k_g`` per group are integers; ``x`` stays continuous:

       Σ_s x[d,s] = capacity_d         (unallocated absorbs the rest)
       Σ_d x[d,s] = y_s,  min_s ≤ y_s ≤ max_s
       y_s = W_s · k_g                 (exact fair share: W coprime integer weights)

   For fixed integer totals the rest is again a bipartite transportation problem, so
   the x of a vertex is integral; a handful of integer variables keeps the MILP small
   whatever the number of disks. Its answer's layout is then *polished*: the LP with
   the totals fixed, re-solved for the best order of spaces on disks (the MILP's gap
   tolerance is coarser than the tiny order coefficients).

3. **Cost of exactness.** Exact ratios can only move in steps of ΣW MiB. The rows of
   the reference table are binding: weights 2:1 on 100 MiB give 66 + 33 with 1 MiB
   unavoidably unallocated. But weights such as 1 : 1.0001 (W = 10000 : 10001) would
   leave whole disks empty. So exact shares are kept when they cost at most 1 MiB per
   fair-shared space over the LP optimum (the reference's own worst case for
   flooring), and otherwise, or when no exact split exists (min 11 at 2:3 on 28 MiB),
   every member of a group is held within 1 MiB of its exact share instead:
   ``|y_s − W_s·t_g| ≤ 1`` with a continuous ``t_g``. That relaxed program is always
   feasible when the LP is (round the LP's totals down).

Every final answer is verified exactly; a failed verification is an engine bug and
raises, it is never returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.optimize
import scipy.sparse

from apportion.errors import Rejected
from apportion.partition import lp
from apportion.partition.lp import LpSolution, Rows
from apportion.partition.model import FloatArray, IntArray, Problem

# How far an LP value may sit from a whole MiB and still be read as that MiB.
INTEGRAL = 1e-6
# No relative gap (HiGHS's default 1e-4 of an objective of ~2 per MiB could leave
# thousands of MiB unallocated on big disks): the search closes at HiGHS's absolute gap
# of 1e-6, far below the ≥ 1 that one more allocated MiB is worth. With a few integer
# variables (one per group) that costs ~20 ms on 24 disks × 40 spaces.
_MIP_REL_GAP = 0.0


@dataclass(frozen=True, slots=True, eq=False)
class IntegerSolution:
    x: IntArray  # (D·S,) whole MiB, unallocated included
    method: str  # "vertex" | "milp-exact" | "milp-within-1"


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
    x = _round(problem, lp.x)
    if x is None or violations(problem, x, exact_shares=True):
        return None
    return IntegerSolution(x, "vertex")


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


def _milp(problem: Problem, upper: Rows, *, exact: bool, time_limit: float) -> FloatArray | None:
    """Whole-MiB totals of the group members (one per member, groups in order), or None.

    Columns: x (D·S, continuous), then per group member either nothing (exact: the
    member's total is W_s·k_g with one integer k_g per group) or an integer total y_m
    (within 1: |y_m − W_s·t_g| ≤ 1 with one continuous t_g per group).
    """
    n = problem.variables
    members, group_of, weights = _member_columns(problem)
    m, g = len(members), len(problem.groups)
    sum_rows, sum_cols = lp.sum_over_disks(problem, members)
    if exact:
        # Σ_d x[d,s] − W_s·k_g = 0
        extra = g
        rows = np.concatenate([sum_rows, np.arange(m)])
        cols = np.concatenate([sum_cols, n + group_of])
        values = np.concatenate([np.ones(len(sum_rows)), -weights])
        shares = scipy.sparse.coo_array((values, (rows, cols)), shape=(m, n + extra))
        share_low = share_high = np.zeros(m)
        integrality = np.concatenate([np.zeros(n), np.ones(g)])
    else:
        # Σ_d x[d,s] − y_m = 0 and −1 ≤ y_m − W_s·t_g ≤ 1
        extra = m + g
        rows = np.concatenate([sum_rows, np.arange(m), m + np.arange(m), m + np.arange(m)])
        cols = np.concatenate([sum_cols, n + np.arange(m), n + np.arange(m), n + m + group_of])
        values = np.concatenate(
            [
                np.ones(len(sum_rows)),
                -np.ones(m),
                np.ones(m),
                -weights,
            ]
        )
        shares = scipy.sparse.coo_array((values, (rows, cols)), shape=(2 * m, n + extra))
        share_low = np.concatenate([np.zeros(m), -np.ones(m)])
        share_high = np.concatenate([np.zeros(m), np.ones(m)])
        integrality = np.concatenate([np.zeros(n), np.ones(m), np.zeros(g)])
    upper_matrix = upper.matrix
    widened = scipy.sparse.hstack(
        [upper_matrix, scipy.sparse.csr_array((upper_matrix.shape[0], extra))]
    )
    matrix = scipy.sparse.vstack([widened, shares]).tocsr()
    result = scipy.optimize.milp(
        -np.concatenate([problem.objective, np.zeros(extra)]),
        constraints=scipy.optimize.LinearConstraint(
            matrix,
            np.concatenate([np.full(upper_matrix.shape[0], -np.inf), share_low]),
            np.concatenate([upper.rhs, share_high]),
        ),
        integrality=integrality,
        bounds=scipy.optimize.Bounds(0, np.inf),
        options={"mip_rel_gap": _MIP_REL_GAP, "time_limit": time_limit},
    )
    if result.x is None:
        if result.status == 1:  # time or node limit before any whole-MiB answer
            raise Rejected.at(
                "schema",
                f"no whole-MiB layout found within {time_limit:g} s; simplify the fair-share "
                "groups (weights) or raise the solver time limit",
                code="too_complex",
            )
        return None
    x = np.asarray(result.x[:n], dtype=np.float64)
    member_totals: FloatArray = np.rint(
        x.reshape(problem.disks, problem.width)[:, members].sum(axis=0)
    )
    return member_totals


def _polish(problem: Problem, upper: Rows, member_totals: FloatArray) -> IntArray | None:
    """The reference LP with the group members' totals fixed to whole MiB.

    Without fair-share rows the matrix is totally unimodular, so HiGHS's vertex is
    integral, and it is the best layout (order, best_with_disks) for those totals.
    """
    members, _, _ = _member_columns(problem)
    rows, cols = lp.sum_over_disks(problem, members)
    fixed = Rows(rows, cols, np.ones(len(rows)), (len(members), problem.variables), member_totals)
    x = lp.linprog(problem, upper, fixed)
    return None if x is None else _round(problem, x)


def _unallocated(problem: Problem, x: IntArray) -> int:
    return int(totals(problem, x)[problem.real])


def solve(problem: Problem, relaxed: LpSolution, *, time_limit: float) -> IntegerSolution:
    """Whole MiB for every variable; see the module docstring for the method."""
    vertex = from_vertex(problem, relaxed)
    if vertex is not None:
        return vertex
    upper = lp.upper_rows(problem)
    lp_unallocated = float(problem.capacity.sum()) - float(
        totals(problem, relaxed.x)[: problem.real].sum()
    )
    shared = sum(len(g.members) for g in problem.groups)
    exact = _milp(problem, upper, exact=True, time_limit=time_limit)
    if exact is not None:
        x = _polish(problem, upper, exact)
        if (
            x is not None
            and not violations(problem, x, exact_shares=True)
            and _unallocated(problem, x) - lp_unallocated <= shared + INTEGRAL
        ):
            return IntegerSolution(x, "milp-exact")
    within = _milp(problem, upper, exact=False, time_limit=time_limit)
    if within is not None:
        x = _polish(problem, upper, within)
        if x is not None and not violations(problem, x, exact_shares=False):
            return IntegerSolution(x, "milp-within-1")
    raise RuntimeError("no verified whole-MiB layout found for a feasible partition LP")
