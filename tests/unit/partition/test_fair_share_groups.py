"""Which spaces share fairly: equal (min_size, max_size, best_with_disks) as declared.

Expected answers worked out by hand from the reference's LP (one disk ``sda`` of 100
MiB, type hdd): objective per MiB 2 + 1/2 for the first space, 2 + 1/4 for the second
(both get the bonus of 2 on a disk nobody's best_with_disks holds), 1 for
``unallocated``; a fair-share group adds ``first = second`` for equal weights.
"""

from __future__ import annotations

from typing import Any

import pytest

from apportion.engine import Context
from apportion.partition import dynamic, model, schema

from .support import checked, disks, partition, payload, sizes, solve_payload

ONE_HDD = disks(("sda", 100, "hdd"))
NO_SSD = 'yaql=$.disks.where($.type = "ssd")'


def _groups(data: dict[str, Any]) -> list[tuple[int, ...]]:
    limits = Context().limits
    parsed = schema.parse(checked(data, limits))
    spaces = dynamic.resolve(parsed, limits).spaces
    return [g.members for g in model.fair_share_groups(spaces)]


@pytest.mark.parametrize("empty_selection", [NO_SSD, []], ids=["yaql", "literal"])
def test_a_space_whose_best_with_disks_selects_no_disk_shares_nothing_with_one_naming_none(
    empty_selection: str | list[str],
) -> None:
    # No group: `a` (2.5 a MiB) outbids `b` (2.25) for every MiB; grouped, a = b = 50.
    job = payload([partition("a"), partition("b", best_with_disks=empty_selection)], ONE_HDD)
    assert _groups(job) == []
    assert sizes(solve_payload(job)) == {"sda": [100, 0, 0]}


def test_a_space_whose_selection_finds_no_disk_still_has_no_preference_in_the_objective() -> None:
    # `b` first: it keeps the bonus of 2 on sda (2.5 a MiB against `a`'s 2.25), as a
    # space without best_with_disks would; had it preferred "no disk" it would score
    # 0.5 a MiB, below unallocated's 1, and get nothing.
    job = payload([partition("b", best_with_disks=NO_SSD), partition("a")], ONE_HDD)
    assert sizes(solve_payload(job)) == {"sda": [100, 0, 0]}


def test_two_spaces_whose_selections_find_no_disk_share_fairly_with_each_other() -> None:
    # Both declared the same (empty) set: one group, b = c, together the whole disk.
    job = payload(
        [partition("b", best_with_disks=NO_SSD), partition("c", best_with_disks=[])], ONE_HDD
    )
    assert _groups(job) == [(0, 1)]
    assert sizes(solve_payload(job)) == {"sda": [50, 50, 0]}


def test_a_null_best_with_disks_names_none_and_shares_with_a_space_without_the_key() -> None:
    job = payload([partition("a"), partition("b", best_with_disks=None)], ONE_HDD)
    assert _groups(job) == [(0, 1)]
    assert sizes(solve_payload(job)) == {"sda": [50, 50, 0]}
