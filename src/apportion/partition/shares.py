"""Exact fair shares in whole MiB: branch and bound on one multiplier per group.

The reference LP with its fair-share rows written through a multiplier ``t_g`` per
group (``Σ_d x[d,s] = W_s·t_g`` for every member ``s``; the same points as the
pairwise rows). Only the ``t_g`` must be whole: once they are fixed, what is left is
a bipartite transportation problem, totally unimodular, so HiGHS's vertex is whole
MiB. A handful of integer multipliers whatever the number of disks keeps the search
small. The search starts from the relaxed LP's optimal basis, and each node only
changes the bounds of one ``t_g`` and restarts from its parent's optimal basis: a few
simplex iterations instead of a solve from scratch.

Nodes whose LP bound does not beat the best whole answer by more than
:data:`IMPROVEMENT` are cut: an answer better by less than that is not told apart
from a tie (the order coefficients make real differences far larger).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import highspy
import numpy as np

from apportion import errors
from apportion.errors import Rejected
from apportion.limits import env_name, over_limit
from apportion.partition import highs
from apportion.partition.lp import LpSolution
from apportion.partition.model import FloatArray, Problem

# How far a multiplier may sit from a whole number and still be read as it.
INTEGRAL = 1e-6
# The smallest gain in the objective that makes one whole answer better than another.
IMPROVEMENT = 1e-6
# The search's LPs only bound and rank candidates (the answer is re-solved and verified
# in exact integers), and with sizes of 10⁷ MiB the engine's 1e-9 is below float
# resolution: a warm start could then end on residues it cannot clean up ("unknown").
_SEARCH_PRIMAL_TOLERANCE = 1e-7


@dataclass(frozen=True, slots=True)
class _Node:
    lower: FloatArray  # (G,) bounds of the multipliers
    upper: FloatArray
    start: highspy.HighsBasis  # the parent's optimal basis: a warm start for this node


def _children(node: _Node, t: FloatArray, basis: highspy.HighsBasis) -> list[_Node] | None:
    """The two halves around the first fractional multiplier, the nearer one last
    (popped first); None when every multiplier is whole."""
    fractional = np.flatnonzero(np.abs(t - np.rint(t)) > INTEGRAL)
    if not len(fractional):
        return None
    j = int(fractional[0])
    floor = math.floor(t[j])
    down_upper, up_lower = node.upper.copy(), node.lower.copy()
    down_upper[j], up_lower[j] = floor, floor + 1
    down, up = _Node(node.lower, down_upper, basis), _Node(up_lower, node.upper, basis)
    return [up, down] if t[j] - floor < 0.5 else [down, up]


@dataclass(slots=True)
class _Best:
    multipliers: FloatArray
    value: float
    basis: highspy.HighsBasis


def _search(
    solver: highspy.Highs, problem: Problem, root: list[_Node], deadline: float
) -> _Best | None:
    """Depth first from ``root``'s nodes: the best whole multipliers, or None."""
    n, g = problem.variables, len(problem.groups)
    columns = np.arange(n, n + g, dtype=np.int32)
    stack: list[_Node] = root
    best: _Best | None = None
    while stack:
        if time.monotonic() > deadline:
            raise TimeoutError
        node = stack.pop()
        # From the parent's optimum a bound change takes a few pivots; from wherever the
        # last node (a sibling's subtree, or an infeasible one) left off it can take as
        # many as a solve from scratch.
        solver.setBasis(node.start)
        solver.changeColsBounds(g, columns, node.lower, node.upper)
        x = highs.run(solver)
        if x is None:
            continue
        value = float(problem.objective @ x[:n])
        if best is not None and value <= best.value + IMPROVEMENT:
            continue
        basis = solver.getBasis()
        children = _children(node, x[n:], basis)
        if children is None:
            best = _Best(np.rint(x[n:]), value, basis)
        else:
            stack.extend(children)
    return best


def too_complex(time_limit: float) -> Rejected:
    return over_limit(
        "partition_solver_seconds",
        errors.Problem(
            "schema",
            f"no whole-MiB layout found within {time_limit:g} s; simplify the fair-share "
            f"groups (weights) or raise {env_name('partition_solver_seconds')}",
        ),
    )


def exact(problem: Problem, relaxed: LpSolution, *, time_limit: float) -> FloatArray | None:
    """The best layout whose fair shares hold exactly in whole MiB, or None.

    The values are whole MiB up to float noise (the caller rounds and verifies).
    """
    deadline = time.monotonic() + time_limit
    if relaxed.shares is None or relaxed.multipliers is None or relaxed.basis is None:
        raise ValueError("the relaxed LP of a problem with fair-share groups carries its model")
    solver = relaxed.shares.load()
    solver.setBasis(relaxed.basis)
    g = len(problem.groups)
    whole = _Node(np.zeros(g), np.full(g, np.inf), relaxed.basis)
    root = _children(whole, relaxed.multipliers, relaxed.basis)
    if root is None:  # whole multipliers already: only the layout is fractional
        best: _Best | None = _Best(np.rint(relaxed.multipliers), relaxed.objective, relaxed.basis)
    else:
        solver.setOptionValue("primal_feasibility_tolerance", _SEARCH_PRIMAL_TOLERANCE)
        try:
            best = _search(solver, problem, root, deadline)
        except TimeoutError:
            raise too_complex(time_limit) from None
        finally:
            solver.setOptionValue(
                "primal_feasibility_tolerance", highs.OPTIONS["primal_feasibility_tolerance"]
            )
    if best is None:
        return None
    columns = np.arange(problem.variables, problem.variables + g, dtype=np.int32)
    solver.setBasis(best.basis)
    solver.changeColsBounds(g, columns, best.multipliers, best.multipliers)
    x = highs.run(solver)
    return None if x is None else x[: problem.variables]
