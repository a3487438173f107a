"""The reference LP, built with numpy index arithmetic and solved by HiGHS (one disk
without fair shares: in closed form, :func:`one_disk`).

Rows, exactly as the Bareon allocator (the reference) builds them (``A_ub x ≤ b_ub``):

1. per space with a max:   Σ_d x[d,s] ≤ max_size
2. per disk:               Σ_s x[d,s] ≤ capacity (``unallocated`` included)
3. per space (min 0 too):  −Σ_d x[d,s] ≤ −min_size

and the fair shares: the reference's ``(1/w_first)·first − (1/w_j)·j = 0`` per group
member after the first, with the weights as coprime integers ``W`` so that the
equation is exact. :func:`equality_rows` writes them pairwise, as the reference does
(``W_j·Σ_d x[d,first] − W_first·Σ_d x[d,j] = 0``); :func:`solve` writes the same points
through one multiplier per group (``Σ_d x[d,s] = W_s·t_g``, :func:`share_model`), which
the integer step then makes whole (:mod:`.shares`), starting from this LP's basis.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse

from apportion.partition import highs
from apportion.partition.highs import CscArrays
from apportion.partition.model import FloatArray, IntArray, Problem

# Integer weights up to this are exact in float64 and safe as LP coefficients; past it
# the equality rows are scaled to at most 1 (only reachable with extreme weight ratios).
_EXACT_COEFFICIENT = 2**31


@dataclass(frozen=True, slots=True, eq=False)
class Rows:
    """Sparse rows as coordinates (float64 values, no duplicates) with their right-hand side.

    Coordinates rather than a scipy matrix: :func:`csc_arrays` sorts them into the
    solver's column-wise arrays with a few numpy calls, while building scipy's COO and
    CSR objects costs more than the solve on a small schema. :attr:`matrix` gives the
    scipy form for the within-1-MiB MILP and for tests.
    """

    rows: IntArray
    cols: IntArray
    values: FloatArray
    shape: tuple[int, int]
    rhs: FloatArray

    @property
    def matrix(self) -> scipy.sparse.csr_array:
        """The rows as a scipy CSR matrix (duplicates would be summed; there are none)."""
        coo = scipy.sparse.coo_array((self.values, (self.rows, self.cols)), shape=self.shape)
        return scipy.sparse.csr_array(coo)


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
    rhs = np.concatenate(
        [
            problem.max_size[capped],
            problem.capacity.astype(np.float64),
            -problem.min_size.astype(np.float64),
        ]
    )
    return Rows(rows, cols, values, shape, rhs)


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
    if not problem.groups:
        return None
    first, member, a, b = fair_share_pairs(problem)
    if not len(first):
        return None
    rows_f, cols_f = sum_over_disks(problem, first)
    rows_m, cols_m = sum_over_disks(problem, member)
    values = np.concatenate([np.repeat(a, problem.disks), np.repeat(b, problem.disks)])
    return Rows(
        np.concatenate([rows_f, rows_m]),
        np.concatenate([cols_f, cols_m]),
        values,
        (len(first), problem.variables),
        np.zeros(len(first)),
    )


@dataclass(frozen=True, slots=True, eq=False)
class Model:
    """An LP as HiGHS loads it: minimise ``cost·x``, every column continuous."""

    cost: FloatArray
    bounds: tuple[FloatArray, FloatArray]  # column lower, upper
    rows: tuple[FloatArray, FloatArray]  # row lower, upper
    matrix: CscArrays

    def load(self) -> highspy.Highs:
        return highs.load(self.cost, self.bounds, self.rows, self.matrix)


@dataclass(frozen=True, slots=True, eq=False)
class LpSolution:
    x: FloatArray  # (D·S,)
    cost: FloatArray  # c, the objective's coefficients (maximised)
    # With fair-share groups: the multiplier model the LP was solved in and HiGHS's
    # final basis, from which the integer step's search starts warm.
    shares: Model | None = None
    multipliers: FloatArray | None = None  # (G,) t_g
    basis: highspy.HighsBasis | None = None

    @property
    def objective(self) -> float:
        """The maximised value c·x, computed when asked: only the search for exact fair
        shares reads it, and every other job would pay for a numpy product unread."""
        return float(self.cost @ self.x)


def share_rows(problem: Problem) -> Rows:
    """``Σ_d x[d,s] − W_s·t_g = 0`` per group member.

    One multiplier column ``t_g`` per group after the D·S columns of x: the same
    points as the reference's pairwise rows, with every member tied to its group's
    ``t_g``, so that the integer step has one variable per group to make whole.
    """
    members = [s for g in problem.groups for s in g.members]
    group_of = [j for j, g in enumerate(problem.groups) for _ in g.members]
    weights = [float(w) for g in problem.groups for w in g.weights]
    rows, cols = sum_over_disks(problem, np.array(members, dtype=np.int64))
    m, n = len(members), problem.variables
    return Rows(
        np.concatenate([rows, np.arange(m)]),
        np.concatenate([cols, n + np.array(group_of, dtype=np.int64)]),
        np.concatenate([np.ones(len(rows)), -np.array(weights)]),
        (m, n + len(problem.groups)),
        np.zeros(m),
    )


def share_model(problem: Problem) -> Model:
    """The reference LP with its fair shares through one multiplier per group."""
    upper = upper_rows(problem)
    shares = share_rows(problem)
    g, n = len(problem.groups), problem.variables
    return Model(
        cost=np.concatenate([-problem.objective, np.zeros(g)]),
        bounds=(np.zeros(n + g), np.full(n + g, np.inf)),
        rows=(
            np.concatenate([_no_lower_limit(len(upper.rhs)), shares.rhs]),
            np.concatenate([upper.rhs, shares.rhs]),
        ),
        matrix=csc_arrays([upper, shares], n + g),
    )


def csc_arrays(blocks: Sequence[Rows], columns: int) -> CscArrays:
    """(start, index, value) of the blocks stacked vertically, column-wise for HiGHS.

    The same arrays as ``scipy.sparse.vstack([b.matrix …], format="csc")``: entries
    ordered by column, then row (tests compare).
    """
    offsets = np.cumsum([0, *(b.shape[0] for b in blocks[:-1])])
    rows = np.concatenate([b.rows + off for b, off in zip(blocks, offsets, strict=True)])
    cols = np.concatenate([b.cols for b in blocks])
    values = np.concatenate([b.values for b in blocks])
    order = np.lexsort((rows, cols))
    start = np.zeros(columns + 1, dtype=np.int32)
    np.cumsum(np.bincount(cols, minlength=columns), out=start[1:])
    return start, rows[order].astype(np.int32), values[order].astype(np.float64)


def upper_csc(problem: Problem) -> tuple[CscArrays, FloatArray]:
    """The ``≤`` rows of :func:`upper_rows` straight in column-wise form, with their rhs.

    The matrix depends only on the shape (disks, which spaces have a max), so it comes
    from :func:`_upper_structure`, built once per shape; only the right-hand side is
    this problem's own. Tests compare the result with ``csc_arrays([upper_rows(…)])``.
    """
    max_size = problem.max_size.tolist()
    capped = tuple(m != math.inf for m in max_size)
    matrix = _upper_structure(problem.disks, capped)
    rhs = np.array(
        [m for m, c in zip(max_size, capped, strict=True) if c]
        + problem.capacity.tolist()
        + [-float(v) for v in problem.min_size.tolist()],  # -0.0 for 0, as numpy negates
        dtype=np.float64,
    )
    return matrix, rhs


# Shapes are few (a fleet sends the same schema for every node of a hardware model, and
# sizes do not change the shape), so a small cache answers nearly every job; an entry
# holds 3 int32/float64 values per matrix entry (at most ~3 per LP variable).
@functools.lru_cache(maxsize=64)
def _upper_structure(disks: int, capped: tuple[bool, ...]) -> CscArrays:
    """The ``≤`` matrix column-wise for ``disks`` disks and spaces capped as ``capped``.

    Column ``(d, s)`` holds, in row order: its space's max row (if capped), its disk
    row, its space's min row (not for ``unallocated``). Every disk's block of columns
    has the same pattern but for the disk row, so one block is written out and
    repeated: no coordinate lists, no sort. The arrays are read-only, as they are
    shared by every problem of this shape (HiGHS copies what it is given).
    """
    d, r = disks, len(capped)
    n_capped = sum(capped)
    # One disk's block: row of each entry, 1 where it is the disk row, its sign.
    rows: list[int] = []
    disk_entry: list[int] = []
    signs: list[float] = []
    column_start: list[int] = []
    max_row = 0
    for s, is_capped in enumerate([*capped, False]):  # unallocated last, never capped
        column_start.append(len(rows))
        if is_capped:
            rows.append(max_row)
            disk_entry.append(0)
            signs.append(1.0)
            max_row += 1
        rows.append(n_capped)
        disk_entry.append(1)
        signs.append(1.0)
        if s < r:
            rows.append(n_capped + d + s)
            disk_entry.append(0)
            signs.append(-1.0)
    block = len(rows)
    disk = np.arange(d, dtype=np.int32)[:, None]
    index = (np.array(rows, dtype=np.int32) + disk * np.array(disk_entry, dtype=np.int32)).ravel()
    value = np.array(signs)[None, :].repeat(d, axis=0).ravel()
    start = np.empty(d * len(column_start) + 1, dtype=np.int32)
    start[:-1] = (disk * block + np.array(column_start, dtype=np.int32)).ravel()
    start[-1] = d * block
    for array in (start, index, value):
        array.flags.writeable = False
    return start, index, value


@functools.lru_cache(maxsize=64)
def _column_bounds(n: int) -> tuple[FloatArray, FloatArray]:
    """x ≥ 0 (lower 0, upper ∞) for ``n`` columns.

    The same for every LP of a size, so made once (read-only: HiGHS copies them).
    """
    arrays = (np.zeros(n), np.full(n, np.inf))
    for array in arrays:
        array.flags.writeable = False
    return arrays


@functools.lru_cache(maxsize=64)
def _no_lower_limit(rows: int) -> FloatArray:
    """−∞ for ``rows`` rows: the left-hand side of ``A x ≤ b`` (read-only, shared)."""
    array = np.full(rows, -np.inf)
    array.flags.writeable = False
    return array


def _highs(
    problem: Problem, matrix: CscArrays, lhs: FloatArray, rhs: FloatArray
) -> FloatArray | None:
    """Solve ``max c·x, lhs ≤ A x ≤ rhs, x ≥ 0`` with HiGHS; None when infeasible."""
    lower, upper = _column_bounds(problem.variables)
    solver = highs.load(-problem.objective, (lower, upper), (lhs, rhs), matrix)
    return highs.run(solver)


def solve_rows(problem: Problem, upper: Rows, equal: Rows | None) -> FloatArray | None:
    """Maximise the objective under ``upper`` (≤) and ``equal`` (=) rows, x ≥ 0."""
    blocks = [upper] if equal is None else [upper, equal]
    lhs = _no_lower_limit(len(upper.rhs))
    rhs = upper.rhs
    if equal is not None:
        lhs = np.concatenate([lhs, equal.rhs])
        rhs = np.concatenate([rhs, equal.rhs])
    return _highs(problem, csc_arrays(blocks, problem.variables), lhs, rhs)


def solve(problem: Problem) -> LpSolution | None:
    """Solve the reference LP; ``None`` when it has no solution.

    One disk without fair shares is solved by :func:`one_disk` (its optimum in closed
    form); every other LP by HiGHS.
    """
    if problem.groups:
        return _solve_with_shares(problem)
    if problem.disks == 1 and greedy_is_optimal(problem):
        x = one_disk(problem)
        return None if x is None else LpSolution(x, problem.objective)
    matrix, rhs = upper_csc(problem)  # the common case: the matrix cached for the shape
    x = _highs(problem, matrix, _no_lower_limit(len(rhs)), rhs)
    if x is None:
        return None
    return LpSolution(x, problem.objective)


def _solve_with_shares(problem: Problem) -> LpSolution | None:
    model = share_model(problem)
    solver = model.load()
    solution = highs.run(solver)
    if solution is None:
        return None
    x, t = solution[: problem.variables], solution[problem.variables :]
    return LpSolution(x, problem.objective, model, t, solver.getBasis())


def greedy_is_optimal(problem: Problem) -> bool:
    """Whether :func:`one_disk`'s greedy point is the LP's one optimum: every
    coefficient positive and no two equal (the reference objective always; see there)."""
    coefficient = problem.objective.tolist()
    return min(coefficient) > 0.0 and len(set(coefficient)) == len(coefficient)


def one_disk(problem: Problem) -> FloatArray | None:
    """The LP's optimum on one disk without fair shares, in closed form; ``None`` when
    it is infeasible.

    On one disk the LP is ``max Σ c_s·x_s`` subject to ``min_s ≤ x_s ≤ max_s`` and
    ``Σ x_s ≤ capacity`` (``unallocated`` has neither bound): a fractional knapsack
    in which every MiB weighs the same. With positive, pairwise distinct coefficients
    (:func:`greedy_is_optimal`) its optimum is unique and greedy: every space at its
    min, then the rest of the disk to the spaces in falling order of coefficient, each
    up to its max, until ``unallocated`` (coefficient 1, unbounded) takes what is left.
    Any other feasible point has a MiB on a lower coefficient that a higher one could
    take, so it scores less. The reference objective always has such coefficients
    (order terms ``1/a(i+2)`` strictly falling, the bonus of 2 on top of them, 1 for
    ``unallocated``); the caller hands any other objective to HiGHS.

    One disk with a few spaces is the layout a provisioning service asks for most, and
    a few list operations answer it where loading and running HiGHS costs far more. The
    values are exact whole MiB (HiGHS's vertex is the same point up to float noise), so
    the integer step's vertex check accepts them as they are.
    """
    low = [*problem.min_size.tolist(), 0]
    high = [*problem.max_size.tolist(), math.inf]
    free = int(problem.capacity[0]) - sum(low)
    if free < 0 or any(map(operator.gt, low, high)):
        return None
    coefficient = problem.objective.tolist()
    x = [float(v) for v in low]
    for s in sorted(range(len(x)), key=coefficient.__getitem__, reverse=True):
        take = min(free, high[s] - low[s])
        x[s] += take
        free -= take
        if not free:
            break
    return np.array(x, dtype=np.float64)
