"""The engine's HiGHS calls (highspy) and scipy's linprog solve the same LP to the same optimum.

The engine builds HiGHS's column-wise arrays itself and reuses one solver per thread;
these tests pin both shortcuts to what scipy would have built and solved.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from hypothesis import HealthCheck, given, settings

from apportion.partition import highs, lp, model
from tests.unit.partition.support import problem_of
from tests.unit.partition.test_properties import jobs


def _varied_job(n_disks: int, n_spaces: int) -> dict[str, Any]:
    """Capped, bounded, fixed and weighted spaces (fair-share rows too), some disk-bound."""
    spaces: list[dict[str, Any]] = []
    for i in range(n_spaces):
        space: dict[str, Any] = {"id": f"s{i}", "type": "partition"}
        if i % 4 == 0:
            space["min_size"] = 100 * (i + 1)
        elif i % 4 == 1:
            space["max_size"] = 300 + 10 * i
        elif i % 4 == 2:
            space["size"] = 50 + i
        else:
            space.update(min_size=10, max_size=5000, weight=1 + i % 3)
        if i % 5 == 4:
            space["best_with_disks"] = [f"d{i % n_disks}"]
        spaces.append(space)
    disks = [{"id": f"d{j}", "size": 20000 + 7919 * j} for j in range(n_disks)]
    return {"schema": spaces, "hardware": {"disks": disks}}


def _problem_or_none(data: dict[str, Any]) -> model.Problem | None:
    try:
        return problem_of(data)
    except Exception:  # rejected schemas never reach the LP
        return None


def _scipy_linprog(problem: model.Problem, upper: lp.Rows, equal: lp.Rows | None) -> Any:
    result = scipy.optimize.linprog(
        -problem.objective,
        A_ub=upper.matrix,
        b_ub=upper.rhs,
        A_eq=None if equal is None else equal.matrix,
        b_eq=None if equal is None else equal.rhs,
        bounds=(0, None),
        method="highs",
        options={"dual_feasibility_tolerance": 1e-10, "primal_feasibility_tolerance": 1e-9},
    )
    assert result.status in (0, 2), result.message
    return None if result.status == 2 else result.x


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_the_engines_lp_reaches_the_optimum_of_the_reference_rows_under_scipy(
    generated: Any,
) -> None:
    # The engine writes fair shares through one multiplier per group; scipy solves the
    # reference's own pairwise rows: the same optimum either way.
    problem = _problem_or_none(generated[0])
    if problem is None:
        return
    upper, equal = lp.upper_rows(problem), lp.equality_rows(problem)

    engine = lp.solve(problem)
    pairwise = lp.solve_rows(problem, upper, equal)
    public = _scipy_linprog(problem, upper, equal)

    assert (engine is None) == (pairwise is None) == (public is None)
    if engine is not None and pairwise is not None and public is not None:
        reference = float(problem.objective @ public)
        assert engine.objective == pytest.approx(reference, rel=1e-9, abs=1e-6)
        assert float(problem.objective @ pairwise) == pytest.approx(reference, rel=1e-9, abs=1e-6)
        assert np.all(engine.x >= -1e-7)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs())
def test_the_column_wise_arrays_are_the_ones_scipy_builds(generated: Any) -> None:
    problem = _problem_or_none(generated[0])
    if problem is None:
        return
    upper, equal = lp.upper_rows(problem), lp.equality_rows(problem)
    blocks = [upper] if equal is None else [upper, equal]
    expected = scipy.sparse.vstack([b.matrix for b in blocks], format="csc")

    start, index, value = lp.csc_arrays(blocks, problem.variables)
    (u_start, u_index, u_value), u_rhs = lp.upper_csc(problem)
    scipy_upper = upper.matrix.tocsc()

    assert start.tolist() == expected.indptr.tolist()
    assert index.tolist() == expected.indices.tolist()
    assert value.tolist() == expected.data.tolist()
    assert u_start.tolist() == scipy_upper.indptr.tolist()
    assert u_index.tolist() == scipy_upper.indices.tolist()
    assert u_value.tolist() == scipy_upper.data.tolist()
    assert u_rhs.tolist() == upper.rhs.tolist()


def test_the_column_wise_upper_rows_of_a_24_disk_schema_match_scipy() -> None:
    problem = problem_of(_varied_job(24, 40))
    (start, index, value), rhs = lp.upper_csc(problem)
    upper = lp.upper_rows(problem)
    expected = upper.matrix.tocsc()

    assert start.tolist() == expected.indptr.tolist()
    assert index.tolist() == expected.indices.tolist()
    assert value.tolist() == expected.data.tolist()
    assert rhs.tolist() == upper.rhs.tolist()


def test_a_reused_solver_answers_every_lp_as_a_fresh_one_in_any_order() -> None:
    models = [problem_of(_varied_job(d, s)) for d, s in [(1, 3), (2, 5), (4, 10), (3, 8), (6, 12)]]
    assert any(lp.equality_rows(m) is not None for m in models)
    fresh = []
    for problem in models:
        highs._SOLVERS.highs = None  # the next solve builds a new instance
        fresh.append(lp.solve(problem))
    order = list(range(len(models))) * 3
    random.Random(7).shuffle(order)

    for k in order:
        again = lp.solve(models[k])
        expected = fresh[k]
        assert again is not None
        assert expected is not None
        assert again.x.tolist() == expected.x.tolist()  # bit for bit, not approximately


def test_highs_runs_serially_without_presolve_and_with_the_fine_dual_tolerance() -> None:
    # Presolve and the task pool each cost about a quarter to a half of HiGHS's time on
    # the small schema a provisioning service sends most; the coarse default dual
    # tolerance loses schema order.
    highs._SOLVERS.highs = None
    solver = highs.solver()
    assert solver.getOptionValue("presolve")[1] == "off"
    assert solver.getOptionValue("threads")[1] == 1
    assert solver.getOptionValue("dual_feasibility_tolerance")[1] == 1e-10


def _one_disk(root_min: int, swap: int, disk: int) -> dict[str, Any]:
    return {
        "schema": [
            {"id": "os", "type": "vg", "contains": [{"id": "root"}, {"id": "swap"}]},
            {"id": "root", "type": "lv", "min_size": root_min},
            {"id": "swap", "type": "lv", "size": swap},
        ],
        "hardware": {"disks": [{"id": "sda", "size": disk}]},
    }


def test_problems_of_one_shape_share_a_matrix_and_objective_none_of_them_can_change() -> None:
    # Built once per shape (disks, capped spaces) and shared: a write through one
    # problem would silently change every later LP of that shape, so it must fail.
    small, large = problem_of(_one_disk(5000, 2048, 40000)), problem_of(_one_disk(9000, 512, 80000))
    (start, index, value), small_rhs = lp.upper_csc(small)
    (start2, index2, value2), large_rhs = lp.upper_csc(large)

    assert start is start2
    assert index is index2
    assert value is value2
    assert small.objective is large.objective
    # max of swap, the disk, min of root and swap: the sizes stay each problem's own
    assert small_rhs.tolist() == [2048.0, 40000.0, -5000.0, -2048.0]
    assert large_rhs.tolist() == [512.0, 80000.0, -9000.0, -512.0]
    for shared in (start, index, value, small.objective):
        with pytest.raises(ValueError, match="read-only"):
            shared[0] = 0


def test_a_space_preferring_a_disk_gets_an_objective_of_its_own() -> None:
    plain = problem_of(_varied_job(2, 4))
    preferring = _varied_job(2, 5)  # its fifth space prefers d0
    assert problem_of(preferring).objective is not problem_of(preferring).objective
    assert plain.objective is problem_of(_varied_job(2, 4)).objective
