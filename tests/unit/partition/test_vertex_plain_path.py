"""The vertex check on Python lists (small problems) agrees with the numpy one (hypothesis)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apportion.partition import integer, lp, model
from tests.unit.partition.support import problem_of
from tests.unit.partition.test_properties import jobs

# Whole MiB, float noise either side of the tolerance, and halves (round half to even).
OFFSETS = [0.0, 0.0, 0.0, 1e-9, -1e-9, 2e-6, -2e-6, 0.5, -0.5, 0.25]


@st.composite
def layouts(draw: st.DrawFn) -> tuple[model.Problem, np.ndarray[Any, Any]]:
    data, _, _ = draw(jobs())
    problem = problem_of(data)
    relaxed = lp.solve(problem)
    if relaxed is not None and draw(st.booleans()):
        x = relaxed.x.copy()  # the LP's own vertex, sometimes nudged
    else:
        x = np.array(
            draw(
                st.lists(
                    st.integers(-3, 260), min_size=problem.variables, max_size=problem.variables
                )
            ),
            dtype=np.float64,
        )
    nudges = draw(st.lists(st.sampled_from(OFFSETS), min_size=len(x), max_size=len(x)))
    return problem, x + np.array(nudges, dtype=np.float64)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_the_plain_vertex_check_rounds_and_rejects_as_the_numpy_one(
    case: tuple[model.Problem, np.ndarray[Any, Any]],
) -> None:
    problem, x = case
    assert problem.variables <= integer.PLAIN_VARIABLES
    numpy_x = integer._round(problem, x)
    plain = integer.round_plain(problem, x.tolist())
    if numpy_x is None:
        assert plain is None
        return
    assert plain is not None
    assert np.array(plain, dtype=np.int64).ravel().tolist() == numpy_x.tolist()
    assert integer.violations_plain(problem, plain) == integer.violations(
        problem, numpy_x, exact_shares=True
    )


def test_a_vertex_off_a_whole_mib_is_not_one_on_either_path() -> None:
    problem = problem_of(
        {
            "schema": [{"id": "a", "type": "partition"}],
            "hardware": {"disks": [{"id": "d", "size": 10}]},
        }
    )
    x = np.array([4.5, 5.5])
    assert integer._round(problem, x) is None
    assert integer.round_plain(problem, x.tolist()) is None
    assert integer.round_plain(problem, [4.0000000001, 6.0]) == [[4, 6]]


def test_a_vertex_with_an_infinite_or_undefined_value_is_no_layout() -> None:
    problem = problem_of(
        {
            "schema": [{"id": "a", "type": "partition"}],
            "hardware": {"disks": [{"id": "d", "size": 10}]},
        }
    )
    assert integer.round_plain(problem, [float("inf"), 6.0]) is None
    assert integer.round_plain(problem, [4.0, float("-inf")]) is None
    assert integer.round_plain(problem, [float("nan"), 6.0]) is None
