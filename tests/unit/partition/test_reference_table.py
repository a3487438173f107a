"""Every row of the reference table of the Bareon allocator's LP rows, with its exact values.

The lvs sit in a vg `vg1` listed first; one disk sda of 100 MiB unless stated.
"""

from __future__ import annotations

from typing import Any

import pytest

from apportion.errors import Infeasible

from .support import disks, in_vg, lv, payload, sizes, solve_payload

TWO_DISKS = disks(("sda", 100), ("sdb", 100))

ROWS: list[
    tuple[
        str, list[dict[str, Any]], list[dict[str, Any]] | None, dict[str, Any], dict[str, list[int]]
    ]
] = [
    (
        "max then min",
        [lv("lv1", max_size=20), lv("lv2", min_size=20)],
        None,
        {},
        {"sda": [20, 80, 0]},
    ),
    ("max then none", [lv("lv1", max_size=20), lv("lv2")], None, {}, {"sda": [20, 80, 0]}),
    ("two max", [lv("lv1", max_size=30), lv("lv2", max_size=20)], None, {}, {"sda": [30, 20, 50]}),
    (
        "min then max",
        [lv("lv1", min_size=20), lv("lv2", max_size=20)],
        None,
        {},
        {"sda": [100, 0, 0]},
    ),
    (
        "max, min, size",
        [lv("lv1", max_size=20), lv("lv2", min_size=20), lv("lv3", size=50)],
        None,
        {},
        {"sda": [20, 30, 50, 0]},
    ),
    ("two min", [lv("lv1", min_size=50), lv("lv2", min_size=50)], None, {}, {"sda": [50, 50, 0]}),
    ("none then min", [lv("lv1"), lv("lv2", min_size=20)], None, {}, {"sda": [80, 20, 0]}),
    ("two sizes", [lv("lv1", size=15), lv("lv2", size=10)], None, {}, {"sda": [15, 10, 75]}),
    (
        "two disks 100+100",
        [lv("lv1"), lv("lv2")],
        TWO_DISKS,
        {},
        {"sda": [100, 0, 0], "sdb": [0, 100, 0]},
    ),
    (
        "two disks",
        [lv("lv1", size=20), lv("lv2")],
        TWO_DISKS,
        {},
        {"sda": [20, 80, 0], "sdb": [0, 100, 0]},
    ),
    (
        "ram 20",
        [lv("lv1", size="yaql=$.ram * 2"), lv("lv2")],
        TWO_DISKS,
        {"ram": 20},
        {"sda": [40, 60, 0], "sdb": [0, 100, 0]},
    ),
    ("weights 2:1", [lv("a", weight=2), lv("b", weight=1)], None, {}, {"sda": [66, 33, 1]}),
]


@pytest.mark.parametrize(
    ("spaces", "hardware_disks", "hardware", "expected"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_reference_table_row_gives_the_reference_sizes(
    spaces: list[dict[str, Any]],
    hardware_disks: list[dict[str, Any]] | None,
    hardware: dict[str, Any],
    expected: dict[str, list[int]],
) -> None:
    result = solve_payload(payload(in_vg(*spaces), hardware_disks, **hardware))
    assert sizes(result) == expected


def test_reference_table_infeasible_row_has_no_solution_and_says_why() -> None:
    job = payload(in_vg(lv("lv1", min_size=80), lv("lv2", min_size=30)))
    with pytest.raises(Infeasible) as caught:
        solve_payload(job)
    assert caught.value.message.startswith(
        "spaces lv1 (min 80) and lv2 (min 30) need 110 MiB but the disk holds 100 MiB"
    )
