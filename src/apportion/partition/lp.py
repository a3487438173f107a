"""The reference LP, built with numpy index arithmetic and solved by HiGHS.

Rows, exactly as the Bareon allocator builds them (``A_ub x ≤ b_ub``):

1. per space with a max:   Σ_d x[d,s] ≤ max_size
2. per disk:               Σ_s x[d,s] ≤ capacity (``unallocated`` included)
3. per space (min 0 too):  −Σ_d x[d,s] ≤ −min_size

and equalities (``A_eq x = 0``), one per group member after the first:
``W_j·Σ_d x[d,first] − W_first·Σ_d x[d,j] = 0`` — the reference's
``(1/w_first)·first − (1/w_j)·j = 0`` multiplied by ``w_first·w_j``, with the weights
as coprime integers so that the equation is exact.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.optimize
import scipy.sparse

from apportion.partition.model import FloatArray, IntArray, Problem

try:
    # The HiGHS core scipy bundles: the very solver scipy.optimize.linprog(method="highs")
    # ends in. Each public call costs ~1 ms of Python around a solve that takes ~0.15 ms
    # on a small schema (linprog's input checks and sparse stacking; its private
    # `_highs_wrapper` still builds three HighsOptionsManager objects per option), and a
    # worker answering small jobs spends most of its time there. Calling the core keeps
    # the same solver, model and options. It is private API, so if a scipy release
    # moves it we fall back to linprog (the tests compare both paths).
    import scipy.optimize._highspy._core as _HIGHS
except ImportError:  # pragma: no cover - depends on the scipy release
    _HIGHS = None

HIGHS_CORE = _HIGHS is not None  # False: every LP goes through linprog

# (start, index, value): a matrix column-wise, as HiGHS takes it (int32 indices).
CscArrays = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float64]]

# Integer weights up to this are exact in float64 and safe as LP coefficients; past it
# the equality rows are scaled to at most 1 (only reachable with extreme weight ratios).
_EXACT_COEFFICIENT = 2**31


@dataclass(frozen=True, slots=True, eq=False)
class Rows:
    """Sparse rows as coordinates (float64 values, no duplicates) with their right-hand side.

    Coordinates rather than a scipy matrix: the direct HiGHS path sorts them into the
    solver's column-wise arrays with a few numpy calls (:func:`csc_arrays`), while
    building scipy's COO and CSR objects cost more than the solve on a small schema.
    :attr:`matrix` gives the scipy form for the MILP step, the public linprog and tests.
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
class LpSolution:
    x: FloatArray  # (D·S,)
    objective: float  # maximised value of c·x


# HiGHS's default dual tolerance (1e-7) is coarser than the gaps between late order
# coefficients (1/a(i) − 1/a(i+1) ≈ 8/i³: 6e-8 at i = 500), and it then stops at a
# vertex that ignores schema order; 1e-10 is the finest HiGHS accepts.
#
# Presolve off: on the small schemas a provisioning service sends most often (a few
# disks, a handful of spaces) HiGHS's presolve costs as much as the simplex itself
# (~25 of ~55 µs, bench/worker.md), and on large ones it reduces nothing and saves no
# time (24 disks × 40 spaces: 30 ms off, 33 ms on). The answers are the same on every
# reference and seed example and on 3,000 random schemas compared both ways; a
# degenerate LP with several optimal vertices (seen at 48 disks × 60 spaces) may end at
# another optimal vertex, with the same objective to 1e-13.
_OPTIONS: dict[str, float | bool] = {
    "dual_feasibility_tolerance": 1e-10,
    "primal_feasibility_tolerance": 1e-9,
    "presolve": False,  # linprog's spelling; the core's is the string "off"
}


# HiGHS model statuses (HighsModelStatus): optimal, infeasible.
_OPTIMAL, _INFEASIBLE = 7, 8
# MatrixFormat.kColwise and ObjSense.kMinimize, as passModel's array form takes them.
_COLUMN_WISE, _MINIMIZE = 1, 1


def _new_solver() -> Any:
    """A HiGHS instance with HiGHS's defaults plus ``_OPTIONS``, writing no log at all.

    ``output_flag`` off only silences logging (linprog does the same with
    ``disp=False``); the solve is the same.
    """
    options = _HIGHS.HighsOptions()
    options.log_to_console = False
    options.output_flag = False
    for name, value in _OPTIONS.items():
        setattr(options, name, ("on" if value else "off") if name == "presolve" else value)
    highs = _HIGHS._Highs()
    if highs.passOptions(options) == _HIGHS.HighsStatus.kError:
        raise RuntimeError("HiGHS refused the partition LP's options")
    return highs


_SOLVERS = threading.local()


def _solver() -> Any:
    """This thread's HiGHS instance, reused from one LP to the next.

    Building and tearing down an instance costs ~0.1 ms, as much as solving a small
    schema. Reuse carries nothing over: ``passModel`` clears the previous model and
    every piece of solver state (presolve, basis, solution, simplex data) before the
    new model is loaded, so each LP is solved from scratch (tests compare a reused
    solver with a fresh one on the same LPs in shuffled order). One instance per
    thread, because a HiGHS instance must not be shared between threads.
    """
    highs = getattr(_SOLVERS, "highs", None)
    if highs is None:
        highs = _SOLVERS.highs = _new_solver()
    return highs


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


def _direct(problem: Problem, upper: Rows, equal: Rows | None) -> FloatArray | None:
    """The LP through scipy's HiGHS core: ``lhs ≤ A x ≤ rhs`` with equalities as lhs = rhs."""
    blocks = [upper] if equal is None else [upper, equal]
    lhs = np.full(len(upper.rhs), -np.inf)
    rhs = upper.rhs.astype(np.float64)
    if equal is not None:
        lhs = np.concatenate([lhs, equal.rhs])
        rhs = np.concatenate([rhs, equal.rhs])
    return _highs(problem, csc_arrays(blocks, problem.variables), lhs, rhs)


@functools.lru_cache(maxsize=64)
def _column_bounds(
    n: int,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int32]]:
    """x ≥ 0 (lower 0, upper ∞) and every column continuous, for ``n`` columns.

    The same for every LP of a size, so made once (read-only: HiGHS copies them).
    """
    arrays = (np.zeros(n), np.full(n, np.inf), np.zeros(n, dtype=np.int32))
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
    """Solve ``max c·x, lhs ≤ A x ≤ rhs, x ≥ 0`` with HiGHS's core; None when infeasible.

    Exactly what ``_highs_wrapper`` (linprog's last step) hands HiGHS: the model
    column-wise, the options above, a solver holding no state from earlier LPs.
    """
    assert _HIGHS is not None
    start, index, value = matrix
    n = problem.variables
    highs = _solver()
    # passModel's array form builds the same HighsLp in C++ (column-wise, minimise, no
    # offset) as the attribute-by-attribute form the wrapper uses, minus ~15 Python
    # conversions. Integrality all continuous, as the wrapper passes it.
    lower, upper, continuous = _column_bounds(n)
    loaded = highs.passModel(
        n,
        len(rhs),
        len(value),
        _COLUMN_WISE,
        _MINIMIZE,
        0.0,
        -problem.objective,
        lower,
        upper,
        lhs,
        rhs,
        start,
        index,
        value,
        continuous,
    )
    error = _HIGHS.HighsStatus.kError
    if loaded == error:
        raise RuntimeError("HiGHS could not solve the partition LP: it refused the model")
    solved = highs.run() != error
    status = int(highs.getModelStatus())
    if status == _INFEASIBLE:
        return None
    if status != _OPTIMAL or not solved:
        raise RuntimeError(
            "HiGHS could not solve the partition LP: "
            f"{highs.modelStatusToString(highs.getModelStatus())}"
        )
    return np.array(highs.getSolution().col_value, dtype=np.float64)


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
    equal = equality_rows(problem)
    if _HIGHS is not None and equal is None:  # the common case, without coordinate lists
        matrix, rhs = upper_csc(problem)
        x = _highs(problem, matrix, _no_lower_limit(len(rhs)), rhs)
    else:
        x = linprog(problem, upper_rows(problem), equal)
    if x is None:
        return None
    return LpSolution(x, float(problem.objective @ x))
