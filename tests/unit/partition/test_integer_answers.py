"""Whole MiB that satisfy every constraint exactly (docs/contract.md#partition; beyond the seed)."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.engine import Context
from apportion.partition import dynamic, integer, lp, model, schema

from .support import checked, disks, in_vg, lv, payload, sizes, solve_payload, totals


def _method(data: dict[str, Any]) -> str:
    limits = Context().limits
    parsed = schema.parse(checked(data, limits))
    problem = model.build(parsed.disks, dynamic.resolve(parsed, limits).spaces)
    relaxed = lp.solve(problem)
    assert relaxed is not None
    return integer.solve(problem, relaxed, time_limit=10).method


def test_min_10_and_min_10_weight_3_give_25_and_75_not_a_floored_24() -> None:
    # Upstream floors HiGHS's 24.999999999999996 to 24; the exact answer is 25 + 75.
    job = payload(in_vg(lv("a", min_size=10), lv("b", min_size=10, weight=3)))
    assert sizes(solve_payload(job)) == {"sda": [25, 75, 0]}


def test_weights_2_to_1_keep_the_ratio_exact_and_leave_one_mib() -> None:
    job = payload(in_vg(lv("a", weight=2), lv("b", weight=1)))
    assert sizes(solve_payload(job)) == {"sda": [66, 33, 1]}
    assert _method(job) == "exact"


def test_three_equal_spaces_split_99_mib_exactly_and_leave_one() -> None:
    job = payload(in_vg(lv("a"), lv("b"), lv("c")))
    assert sizes(solve_payload(job)) == {"sda": [33, 33, 33, 1]}


def test_an_integral_lp_vertex_needs_no_search() -> None:
    job = payload(in_vg(lv("root", min_size=50), lv("swap", size=10)))
    assert _method(job) == "vertex"


def test_near_equal_weights_fall_back_to_shares_within_one_mib() -> None:
    # 1 : 1.0001 is 10000 : 10001 in whole numbers; exact shares would leave the disk
    # empty, so each space is held within 1 MiB of its exact share instead.
    job = payload(in_vg(lv("a", weight=1), lv("b", weight=1.0001)))
    assert sizes(solve_payload(job)) == {"sda": [50, 50, 0]}
    assert _method(job) == "within-1"


def test_weights_without_an_exact_whole_mib_split_still_meet_every_min() -> None:
    # min 11 at 2:3 needs t ≥ 5.5, i.e. 27.5 MiB: feasible on 28, but an exact 2:3 split
    # of whole MiB needs multiples of 5 (30 > 28). Within 1 MiB: 12 and 16.
    job = payload(
        in_vg(lv("a", min_size=11, weight=2), lv("b", min_size=11, weight=3)), disks(("sda", 28))
    )
    assert sizes(solve_payload(job)) == {"sda": [12, 16, 0]}
    assert _method(job) == "within-1"


def test_fractional_bounds_round_inwards_and_size_to_the_nearest_mib() -> None:
    job = payload(
        in_vg(lv("a", min_size=10.2), lv("b", max_size=20.7), lv("c", size=10.5)),
        disks(("sda", 100.7)),
    )
    result = solve_payload(job)
    assert result.disks[0].size == 100  # a disk offers whole MiB only
    assert sizes(result) == {"sda": [89, 0, 11, 0]}


def test_a_min_size_a_hair_below_a_whole_mib_is_that_mib() -> None:
    job = payload(in_vg(lv("a", min_size=24.9999999999), lv("b", size=75)))
    assert sizes(solve_payload(job)) == {"sda": [25, 75, 0]}


def test_size_zero_means_exactly_nothing_and_the_space_is_still_listed() -> None:
    job = payload(in_vg(lv("swap", size=0), lv("root")))
    result = solve_payload(job)
    assert sizes(result) == {"sda": [0, 100, 0]}
    assert [s.space_id for s in result.disks[0].spaces] == ["swap", "root", "unallocated"]


def test_fixed_sizes_with_different_weights_are_not_forced_into_a_ratio() -> None:
    job = payload(in_vg(lv("a", size=10, weight=1), lv("b", size=10, weight=0.5)))
    assert sizes(solve_payload(job)) == {"sda": [10, 10, 80]}


def test_a_weight_zero_space_takes_no_part_in_fair_sharing() -> None:
    job = payload(in_vg(lv("a", weight=0), lv("b"), lv("c")))
    # a has no ratio to keep, so it comes first; b and c share nothing equally.
    assert sizes(solve_payload(job)) == {"sda": [100, 0, 0, 0]}


@pytest.mark.parametrize("size", [1_907_729, 3_815_458, 14_305_280])
def test_large_disks_split_2_to_1_exactly(size: int) -> None:
    job = payload(in_vg(lv("a", weight=2), lv("b", weight=1)), disks(("sda", size)))
    got = totals(solve_payload(job))
    third = size // 3
    assert got == {"a": 2 * third, "b": third, "unallocated": size - 3 * third}


def test_two_disks_with_a_weighted_pair_fill_both_disks() -> None:
    job = payload(
        in_vg(lv("a", min_size=1, weight=3), lv("b", min_size=1, weight=1)),
        disks(("sda", 1000), ("sdb", 601)),
    )
    got = totals(solve_payload(job))
    assert got["a"] == 3 * got["b"]
    assert got["unallocated"] <= 3  # only what a 3:1 split in whole MiB cannot use
