"""The HiGHS solver the partition engine builds: public highspy API, quiet, warm starts.

`apportion solve` writes its JSON on stdout, so a solver that prints a banner when
it is built (highspy 1.16 does) would corrupt every answer.
"""

from __future__ import annotations

import numpy as np
import pytest

from apportion.partition import highs


def test_building_a_solver_prints_nothing_on_stdout_or_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    capfd.readouterr()
    highs._SOLVERS.highs = None  # the next load builds a new one
    solver = highs.load(
        np.array([-1.0]),
        (np.zeros(1), np.full(1, np.inf)),
        (np.array([-np.inf]), np.array([5.0])),
        (np.array([0, 1], dtype=np.int32), np.array([0], dtype=np.int32), np.array([1.0])),
    )
    highs.run(solver)
    out, err = capfd.readouterr()
    assert (out, err) == ("", ""), f"highspy {highs.version()} writes when a solver is built"


def test_a_bound_change_is_solved_from_the_kept_basis_in_a_few_pivots() -> None:
    # max x + 2y, x + y ≤ 4, y ≤ 3: y = 3, x = 1. Then y ≤ 1: x = 3, y = 1.
    solver = highs.load(
        np.array([-1.0, -2.0]),
        (np.zeros(2), np.full(2, np.inf)),
        (np.full(2, -np.inf), np.array([4.0, 3.0])),
        (
            np.array([0, 1, 3], dtype=np.int32),
            np.array([0, 0, 1], dtype=np.int32),
            np.array([1.0, 1.0, 1.0]),
        ),
    )
    first = highs.run(solver)
    assert first is not None
    assert first.tolist() == [1.0, 3.0]
    solver.changeColBounds(1, 0.0, 1.0)
    second = highs.run(solver)
    assert second is not None
    assert second.tolist() == [3.0, 1.0]
    assert solver.getInfo().simplex_iteration_count <= 2
