"""Valid schemas without an allocation are `infeasible`, saying which spaces and disks."""

from __future__ import annotations

import pytest

from apportion.engine import run
from apportion.errors import Infeasible

from .support import disks, in_vg, lv, partition, payload, solve_payload


def _message(data: dict[str, object]) -> str:
    with pytest.raises(Infeasible) as caught:
        solve_payload(data)
    return caught.value.message


def test_one_space_larger_than_all_disks_is_named_with_both_sizes() -> None:
    message = _message(payload([partition("data", min_size=150)], disks(("a", 60), ("b", 40))))
    assert message == (
        "space data (min 150) needs 150 MiB but the disks hold 100 MiB; "
        "lower a min_size/size or add disk space"
    )


def test_fixed_sizes_are_named_as_sizes() -> None:
    message = _message(payload(in_vg(lv("root", size=70), lv("swap", size=40))))
    assert message.startswith("spaces root (size 70) and swap (size 40) need 110 MiB")


def test_a_weighted_fair_share_counts_what_the_heavier_space_must_get() -> None:
    # Both need 10, but at 1:3 the heavier one gets 30 when the lighter gets its 10.
    message = _message(
        payload(in_vg(lv("a", min_size=10), lv("b", min_size=10, weight=3)), disks(("s", 30)))
    )
    assert message.startswith(
        "spaces a (min 10) and b (min 10, 30 as its weighted fair share) need 40 MiB "
        "but the disk holds 30 MiB"
    )


def test_a_fair_share_group_that_cannot_meet_its_own_bounds_is_explained() -> None:
    message = _message(
        payload(
            in_vg(lv("a", min_size=10, max_size=20), lv("b", min_size=10, max_size=20, weight=3))
        )
    )
    assert "spaces a and b share fairly in the ratio 1:3" in message
    assert "min_size 10 and max_size 20" in message


def test_engine_envelope_is_infeasible_with_per_space_details() -> None:
    envelope = run("partition", payload(in_vg(lv("lv1", min_size=80), lv("lv2", min_size=30))))
    assert envelope.status == "infeasible"
    assert envelope.error is not None
    assert envelope.error.code == "infeasible"
    assert [d.path for d in envelope.error.details] == ["schema[1].min_size", "schema[2].min_size"]
