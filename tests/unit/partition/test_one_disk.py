"""One disk without fair shares: the LP's optimum in closed form, HiGHS's point exactly.

The worker's most common job (one disk, a few spaces) is answered by
:func:`apportion.partition.lp.one_disk`, a greedy fill in order of the objective's
coefficients; these tests hold it to the vertex HiGHS finds for the same LP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given
from hypothesis import strategies as st

from apportion.engine import run
from apportion.errors import Rejected
from apportion.partition import highs, lp, model
from tests.support.jobs import SMALL_PARTITION
from tests.support.samples import comparison
from tests.unit.partition.support import problem_of


def _by_highs(problem: model.Problem) -> Any:
    """The same LP through HiGHS, as every multi-disk problem is solved."""
    matrix, rhs = lp.upper_csc(problem)
    return lp._highs(problem, matrix, lp._no_lower_limit(len(rhs)), rhs)


@st.composite
def one_disk_jobs(draw: st.DrawFn) -> dict[str, Any]:
    sizes = st.sampled_from([0, 1, 7, 100, 512, 2048, 5000, 40000, 10**6])
    spaces: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 14))):
        space: dict[str, Any] = {"id": f"s{i}", "type": draw(st.sampled_from(["lv", "partition"]))}
        form = draw(st.sampled_from(["min", "max", "range", "size"]))
        # Spaces with equal (min, max, best_with_disks) form a fair-share group, which
        # goes to HiGHS: adding i keeps each space's bounds its own.
        low = draw(sizes) + i
        if form == "min":
            space["min_size"] = low
        elif form == "max":
            space["max_size"] = low
        elif form == "range":
            space.update(min_size=low, max_size=low + draw(sizes))
        else:
            space["size"] = low
        space["weight"] = draw(st.sampled_from([1, 2, 0.5]))
        if draw(st.booleans()):
            space["best_with_disks"] = draw(st.sampled_from([[], ["sda"]]))
        spaces.append(space)
    lvs = [{"id": s["id"]} for s in spaces if s["type"] == "lv"]
    vgs = [{"id": "vg1", "type": "vg", "contains": lvs}] if lvs else []
    disk = {"id": "sda", "size": draw(st.sampled_from([0, 50, 4096, 40000, 10**6, 4 * 10**6]))}
    return {"schema": vgs + spaces, "hardware": {"disks": [disk]}}


def _highs_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    load = highs.load

    def counted(*args: Any) -> Any:
        calls.append(1)
        return load(*args)

    monkeypatch.setattr(highs, "load", counted)
    return calls


def test_the_small_job_gets_root_the_rest_of_the_disk_without_a_solver_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_solver(*_: Any) -> Any:
        raise AssertionError("HiGHS was called for a one-disk layout")

    monkeypatch.setattr(highs, "load", no_solver)
    answer = run("partition", {**SMALL_PARTITION, "job_id": "small"}).as_dict()

    assert answer["status"] == "ok"
    (disk,) = answer["result"]["disks"]
    assert [(s["space_id"], s["size"]) for s in disk["spaces"]] == [
        ("root", 37952),
        ("swap", 2048),
        ("unallocated", 0),
    ]


@comparison(100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_disk_jobs())
def test_the_greedy_point_is_the_vertex_highs_finds_on_one_disk(data: dict[str, Any]) -> None:
    try:
        problem = problem_of(data)
    except Rejected:  # e.g. a vg's lvs larger than the disk: never reaches the LP
        assume(False)
    assume(not problem.groups)
    assert lp.greedy_is_optimal(problem)

    greedy = lp.one_disk(problem)
    expected = _by_highs(problem)

    assert (greedy is None) == (expected is None)
    if greedy is not None and expected is not None:
        assert greedy.tolist() == np.rint(expected).tolist()
        assert np.abs(greedy - expected).max() <= 1e-6
        assert greedy.tolist() == [float(int(v)) for v in greedy.tolist()]  # whole MiB


def test_a_space_whose_min_exceeds_its_max_leaves_the_one_disk_lp_without_answer() -> None:
    problem = problem_of(
        {
            "schema": [{"id": "a", "type": "partition"}],
            "hardware": {"disks": [{"id": "sda", "size": 100}]},
        }
    )
    impossible = model.Problem(
        problem.disk_ids,
        problem.capacity,
        problem.spaces,
        np.array([60], dtype=np.int64),
        np.array([50.0]),
        (),
        problem.objective,
    )

    assert lp.one_disk(impossible) is None
    assert _by_highs(impossible) is None


def test_spaces_needing_more_than_the_disk_leave_the_one_disk_lp_without_answer() -> None:
    problem = problem_of(
        {
            "schema": [
                {"id": "a", "type": "partition", "min_size": 70},
                {"id": "b", "type": "partition", "size": 40},
            ],
            "hardware": {"disks": [{"id": "sda", "size": 100}]},
        }
    )

    assert lp.one_disk(problem) is None
    assert _by_highs(problem) is None


def test_an_objective_with_equal_coefficients_is_left_to_highs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = problem_of(
        {
            "schema": [{"id": "a", "type": "partition"}, {"id": "b", "type": "partition"}],
            "hardware": {"disks": [{"id": "sda", "size": 100}]},
        }
    )
    tied = model.Problem(
        problem.disk_ids,
        problem.capacity,
        problem.spaces,
        problem.min_size,
        problem.max_size,
        (),
        np.array([2.5, 2.5, 1.0]),
    )

    calls = _highs_calls(monkeypatch)

    assert lp.greedy_is_optimal(problem)
    assert not lp.greedy_is_optimal(tied)
    assert lp.solve(tied) is not None  # one of the tied optima
    assert calls == [1]


def test_a_thousand_spaces_on_one_disk_get_highs_vertex_where_order_terms_are_closest() -> None:
    # Late order coefficients differ by ~8/i³ (~9e-9 at i = 960). The first 900 spaces
    # are fixed; of the last 100, every other one names the disk (bonus 2) and each
    # may grow by 10 MiB, but the disk holds only 300 MiB more than the minimums: which
    # of the late spaces grow hangs on those tiny gaps alone. Weight 0 keeps spaces of
    # equal bounds out of fair-share groups.
    spaces = []
    for i in range(1000):
        low = i % 3
        space: dict[str, Any] = {"id": f"p{i}", "type": "partition", "weight": 0}
        if i < 900:
            space["size"] = low
        else:
            space.update(min_size=low, max_size=low + 10)
        if i % 2 == 0:  # the others then prefer no disk: sda is claimed
            space["best_with_disks"] = ["sda"]
        spaces.append(space)
    disk = sum(i % 3 for i in range(1000)) + 300
    problem = problem_of({"schema": spaces, "hardware": {"disks": [{"id": "sda", "size": disk}]}})
    assert not problem.groups

    greedy = lp.one_disk(problem)
    expected = _by_highs(problem)

    assert greedy is not None
    assert expected is not None
    assert greedy.tolist() == np.rint(expected).tolist()
    grown = [i for i in range(900, 1000) if greedy[i] > i % 3]
    assert grown == list(range(900, 960, 2))  # the first 30 that prefer the disk
