"""One HiGHS instance per thread, through the public ``highspy`` API.

Every LP of the engine goes through :func:`load` and :func:`run`: the model column-wise
(as HiGHS stores it, so nothing is converted), the options below, and a solver reused
from one problem to the next. Reuse carries nothing over: ``passModel`` clears the
previous model and every piece of solver state (basis, solution, simplex data) before
the new one is loaded, so each problem is solved from scratch. Only the bound changes
of :mod:`.integer`'s search keep the basis on purpose (a warm start).
"""

from __future__ import annotations

import threading
from typing import Any

import highspy
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
# (start, index, value): a matrix column-wise, as HiGHS takes it (int32 indices).
CscArrays = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float64]]

# HiGHS's default dual tolerance (1e-7) is coarser than the gaps between late order
# coefficients (1/a(i) − 1/a(i+1) ≈ 8/i³: 6e-8 at i = 500), and it then stops at a
# vertex that ignores schema order; 1e-10 is the finest HiGHS accepts.
#
# Presolve off: on the small schemas a provisioning service sends most often (a few
# disks, a handful of spaces) HiGHS's presolve costs as much as the simplex itself,
# and on large ones it reduces nothing and saves no time. The answers are the same on
# every reference and seed example and on thousands of random schemas compared both
# ways; a degenerate LP with several optimal vertices may end at another optimal
# vertex, with the same objective.
OPTIONS: dict[str, float | str | bool] = {
    "dual_feasibility_tolerance": 1e-10,
    "primal_feasibility_tolerance": 1e-9,
    "presolve": "off",
    # One thread: the simplex runs serially anyway (parallel simplex is off unless asked
    # for), and setting up HiGHS's task pool on every run costs a quarter of a small
    # schema's solve; a worker process answers one job at a time, and forks (yaql's
    # child) are safer without solver threads around.
    "threads": 1,
    "output_flag": False,  # logging only; the solve is the same
}

# As plain ints: comparing highspy's enum objects costs a Python call each, and a small
# schema's whole LP takes ~60 µs.
_OPTIMAL = int(highspy.HighsModelStatus.kOptimal)
_INFEASIBLE = int(highspy.HighsModelStatus.kInfeasible)
_SOLVE_ERROR = int(highspy.HighsModelStatus.kSolveError)
_ERROR = int(highspy.HighsStatus.kError)
_COLUMN_WISE = int(highspy.MatrixFormat.kColwise)
_MINIMIZE = int(highspy.ObjSense.kMinimize)


class SolverError(RuntimeError):
    """HiGHS refused a model or stopped without an answer (an engine bug, not the user's)."""


def _new_solver() -> highspy.Highs:
    highs = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy leaves these unannotated
    # None are used; HiGHS then never calls back into Python.
    highs.disableCallbacks()  # type: ignore[no-untyped-call]
    for name, value in OPTIONS.items():
        if int(highs.setOptionValue(name, value)) == _ERROR:
            raise SolverError(f"HiGHS refused the option {name}={value!r}")
    return highs


_SOLVERS = threading.local()


def solver() -> highspy.Highs:
    """This thread's HiGHS instance (building one costs as much as a small solve).

    One per thread, because a HiGHS instance must not be shared between threads.
    """
    highs: highspy.Highs | None = getattr(_SOLVERS, "highs", None)
    if highs is None:
        highs = _SOLVERS.highs = _new_solver()
    return highs


def load(
    cost: FloatArray,
    bounds: tuple[FloatArray, FloatArray],
    rows: tuple[FloatArray, FloatArray],
    matrix: CscArrays,
) -> highspy.Highs:
    """Load ``min cost·x, row_lower ≤ A x ≤ row_upper, lower ≤ x ≤ upper`` (all continuous)."""
    start, index, value = matrix
    lower, upper = bounds
    row_lower, row_upper = rows
    highs = solver()
    loaded = highs.passModel(
        len(cost),
        len(row_upper),
        len(value),
        _COLUMN_WISE,
        _MINIMIZE,
        0.0,
        cost,
        lower,
        upper,
        row_lower,
        row_upper,
        start,
        index,
        value,
        continuous(len(cost)),
    )
    if int(loaded) == _ERROR:
        raise SolverError("HiGHS refused the partition LP")
    return highs


def run(highs: highspy.Highs) -> FloatArray | None:
    """Solve the loaded model: its column values, or None when it is infeasible.

    A warm start (a basis kept or set) can end on residues just above the feasibility
    tolerance that the simplex then cannot clean up (status "unknown", seen with
    sizes of 10⁷ MiB against the 1e-9 tolerance); a start from scratch does not, so
    that is tried once before giving up.
    """
    status = _solve(highs)
    if status not in (_OPTIMAL, _INFEASIBLE):
        highs.clearSolver()
        status = _solve(highs)
    if status == _INFEASIBLE:
        return None
    if status != _OPTIMAL:
        name = highs.modelStatusToString(highspy.HighsModelStatus(status))
        raise SolverError(f"HiGHS could not solve the partition LP: {name}")
    return np.array(highs.getSolution().col_value, dtype=np.float64)


def _solve(highs: highspy.Highs) -> int:
    if int(highs.run()) == _ERROR:
        return _SOLVE_ERROR
    return int(highs.getModelStatus())


_CONTINUOUS: dict[int, npt.NDArray[np.int32]] = {}


def continuous(n: int) -> npt.NDArray[np.int32]:
    """Integrality "continuous" for ``n`` columns, shared read-only (HiGHS copies it)."""
    array = _CONTINUOUS.get(n)
    if array is None:
        array = np.zeros(n, dtype=np.int32)
        array.flags.writeable = False
        if len(_CONTINUOUS) < 64:
            _CONTINUOUS[n] = array
    return array


def version() -> str:
    """The HiGHS release that answers (named in test failures and benchmark output)."""
    solver_: Any = solver()
    return str(solver_.version())
