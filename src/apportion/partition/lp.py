"""The reference LP, built with numpy index arithmetic and solved by HiGHS.

Rows, exactly as shared/reference/bareon-partition.md lists them (``A_ub x ≤ b_ub``):

1. per space with a max:   Σ_d x[d,s] ≤ max_size
2. per disk:               Σ_s x[d,s] ≤ capacity (``unallocated`` included)
3. per space (min 0 too):  −Σ_d x[d,s] ≤ −min_size

and equalities (``A_eq x = 0``), one per group member after the first:
``W_j·Σ_d x[d,first] − W_first·Σ_d x[d,j] = 0`` — the reference's
``(1/w_first)·first − (1/w_j)·j = 0`` multiplied by ``w_first·w_j``, with the weights
as coprime integers so that the equation is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize
import scipy.sparse

from apportion.partition.model import FloatArray, IntArray, Problem

try:
    # scipy's own binding of HiGHS, the one scipy.optimize.linprog(method="highs") ends
    # in. linprog's input checks, sparse stacking and per-option validation cost ~4 ms
    # per call, far more than HiGHS needs for a small schema (~0.3 ms) — and a worker
    # answering small jobs spends most of its time there. Calling the binding directly
    # keeps the same solver and options. It is private API, so if a scipy release moves
    # it we fall back to linprog (the tests compare both paths).
    from scipy.optimize._highspy._highs_wrapper import _highs_wrapper as _HIGHS
except ImportError:  # pragma: no cover - depends on the scipy release
    _HIGHS = None

# Integer weights up to this are exact in float64 and safe as LP coefficients; past it
# the equality rows are scaled to at most 1 (only reachable with extreme weight ratios).
_EXACT_COEFFICIENT = 2**31


@dataclass(frozen=True, slots=True, eq=False)
class Rows:
    """A sparse matrix with its right-hand side (scipy CSR, float64)."""

    matrix: scipy.sparse.csr_array
    rhs: FloatArray


def sum_over_disks(problem: Problem, spaces: IntArray) -> tuple[IntArray, IntArray]:
    """(row, column) indices of Σ_d x[d, s] for each s in ``spaces`` (row k for spaces[k])."""
    columns = (
        np.arange(problem.disks, dtype=np.int64)[None, :] * problem.width + spaces[:, None]
    ).ravel()
    rows = np.repeat(np.arange(len(spaces), dtype=np.int64), problem.disks)
    return rows, columns


def upper_rows(problem: Problem) -> Rows:
    d, w, r = problem.disks, problem.width, problem.real
    capped = np.flatnonzero(np.isfinite(problem.max_size)).astype(np.int64)
    max_rows, max_cols = sum_over_disks(problem, capped)
    disk_rows = np.repeat(np.arange(d, dtype=np.int64), w) + len(capped)
    disk_cols = np.arange(d * w, dtype=np.int64)
    min_rows, min_cols = sum_over_disks(problem, np.arange(r, dtype=np.int64))
    min_rows = min_rows + len(capped) + d
    rows = np.concatenate([max_rows, disk_rows, min_rows])
    cols = np.concatenate([max_cols, disk_cols, min_cols])
    values = np.concatenate(
        [
            np.ones(len(max_rows) + len(disk_rows)),
            -np.ones(len(min_rows)),
        ]
    )
    shape = (len(capped) + d + r, problem.variables)
    matrix = scipy.sparse.csr_array(scipy.sparse.coo_array((values, (rows, cols)), shape=shape))
    rhs = np.concatenate(
        [
            problem.max_size[capped],
            problem.capacity.astype(np.float64),
            -problem.min_size.astype(np.float64),
        ]
    )
    return Rows(matrix, rhs)


def fair_share_pairs(problem: Problem) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    """(first, member, coefficient of first, coefficient of member) per equality."""
    first, member, w_first, w_member = [], [], [], []
    for group in problem.groups:
        lead, lead_weight = group.members[0], group.weights[0]
        for s, weight in zip(group.members[1:], group.weights[1:], strict=True):
            first.append(lead)
            member.append(s)
            w_first.append(float(weight))  # W_j multiplies the first space's total
            w_member.append(-float(lead_weight))
    a = np.array(w_first, dtype=np.float64)
    b = np.array(w_member, dtype=np.float64)
    if len(a) and max(a.max(), -b.min()) > _EXACT_COEFFICIENT:
        scale = np.maximum(a, -b)
        a, b = a / scale, b / scale
    return (np.array(first, dtype=np.int64), np.array(member, dtype=np.int64), a, b)


def equality_rows(problem: Problem) -> Rows | None:
    first, member, a, b = fair_share_pairs(problem)
    if not len(first):
        return None
    rows_f, cols_f = sum_over_disks(problem, first)
    rows_m, cols_m = sum_over_disks(problem, member)
    values = np.concatenate([np.repeat(a, problem.disks), np.repeat(b, problem.disks)])
    matrix = scipy.sparse.csr_array(
        scipy.sparse.coo_array(
            (values, (np.concatenate([rows_f, rows_m]), np.concatenate([cols_f, cols_m]))),
            shape=(len(first), problem.variables),
        )
    )
    return Rows(matrix, np.zeros(len(first)))


@dataclass(frozen=True, slots=True, eq=False)
class LpSolution:
    x: FloatArray  # (D·S,)
    objective: float  # maximised value of c·x


# HiGHS's default dual tolerance (1e-7) is coarser than the gaps between late order
# coefficients (1/a(i) − 1/a(i+1) ≈ 8/i³: 6e-8 at i = 500), and it then stops at a
# vertex that ignores schema order; 1e-10 is the finest HiGHS accepts.
_OPTIONS = {"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-9}


# HiGHS model statuses (HighsModelStatus): optimal, infeasible.
_OPTIMAL, _INFEASIBLE = 7, 8


def _direct(problem: Problem, upper: Rows, equal: Rows | None) -> FloatArray | None:
    """The LP through scipy's HiGHS binding: ``lhs ≤ A x ≤ rhs`` with equalities as lhs = rhs."""
    assert _HIGHS is not None
    blocks = [upper.matrix] if equal is None else [upper.matrix, equal.matrix]
    matrix = upper.matrix.tocsc() if equal is None else scipy.sparse.vstack(blocks, format="csc")
    rhs = upper.rhs if equal is None else np.concatenate([upper.rhs, equal.rhs])
    lhs = np.full(len(upper.rhs), -np.inf)
    if equal is not None:
        lhs = np.concatenate([lhs, equal.rhs])
    n = problem.variables
    options: dict[str, Any] = {"log_to_console": False, **_OPTIONS}
    result = _HIGHS(
        -problem.objective,
        matrix.indptr.astype(np.int32),
        matrix.indices.astype(np.int32),
        matrix.data.astype(np.float64),
        lhs,
        rhs.astype(np.float64),
        np.zeros(n),
        np.full(n, np.inf),
        np.zeros(n, dtype=np.uint8),
        options,
    )
    status = int(result["status"])
    if status == _INFEASIBLE:
        return None
    if status != _OPTIMAL or result.get("x") is None:
        raise RuntimeError(f"HiGHS could not solve the partition LP: {result.get('message')}")
    return np.asarray(result["x"], dtype=np.float64)


def linprog(problem: Problem, upper: Rows, equal: Rows | None) -> FloatArray | None:
    """Maximise the objective under ``upper`` (≤) and ``equal`` (=) rows, x ≥ 0."""
    if _HIGHS is not None:
        return _direct(problem, upper, equal)
    return linprog_public(problem, upper, equal)


def linprog_public(problem: Problem, upper: Rows, equal: Rows | None) -> FloatArray | None:
    """The same LP through ``scipy.optimize.linprog`` (the fallback; tests compare)."""
    result = scipy.optimize.linprog(
        -problem.objective,
        A_ub=upper.matrix,
        b_ub=upper.rhs,
        A_eq=None if equal is None else equal.matrix,
        b_eq=None if equal is None else equal.rhs,
        bounds=(0, None),
        method="highs",
        options=_OPTIONS,
    )
    if result.status == 2:
        return None
    if result.status != 0:
        raise RuntimeError(f"HiGHS could not solve the partition LP: {result.message}")
    return np.asarray(result.x, dtype=np.float64)


def solve(problem: Problem) -> LpSolution | None:
    """Solve the reference LP with HiGHS; ``None`` when it has no solution."""
    x = linprog(problem, upper_rows(problem), equality_rows(problem))
    if x is None:
        return None
    return LpSolution(x, float(problem.objective @ x))
