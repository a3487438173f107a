"""The worked examples of the partition-allocator seed document, with exact answers."""

from __future__ import annotations

import numpy as np
import pytest

from apportion.partition import lp, model
from tests.unit.partition.support import problem_of

from .support import disks, in_vg, lv, partition, payload, sizes, solve_payload, totals

ROOT_AND_SWAP = in_vg(lv("root", min_size=50), lv("swap", size=10))


def test_root_takes_the_rest_of_a_single_disk_after_the_fixed_swap() -> None:
    # The seed prefers root = 90, swap = 10 over root = 50: no MiB left unallocated.
    result = solve_payload(payload(ROOT_AND_SWAP))
    assert sizes(result) == {"sda": [90, 10, 0]}


def test_the_seed_lp_for_root_and_swap_has_its_max_disk_and_min_rows() -> None:
    # Seed: −x1 − x2 ≥ −100, x1 ≥ 50, −x2 ≥ −10, x2 ≥ 10 (plus `unallocated`, column 3).
    upper = lp.upper_rows(problem_of(payload(ROOT_AND_SWAP)))
    assert upper.matrix.toarray().tolist() == [
        [0, 1, 0],  # swap ≤ 10 (its max)
        [1, 1, 1],  # the disk: root + swap + unallocated ≤ 100
        [-1, 0, 0],  # root ≥ 50
        [0, -1, 0],  # swap ≥ 10
    ]
    assert upper.rhs.tolist() == [10, 100, -50, -10]


def test_two_disks_keep_root_first_and_put_swap_on_the_second_disk() -> None:
    result = solve_payload(payload(ROOT_AND_SWAP, disks(("sda", 100), ("sdb", 200))))
    assert sizes(result) == {"sda": [100, 0, 0], "sdb": [190, 10, 0]}


def test_ordering_puts_root_on_the_first_disk_and_var_on_the_second() -> None:
    job = payload(
        in_vg(lv("root", size=100), lv("var", size=100)), disks(("sda", 100), ("sdb", 100))
    )
    assert sizes(solve_payload(job)) == {"sda": [100, 0, 0], "sdb": [0, 100, 0]}


def test_order_sequence_is_the_seeds_slowly_increasing_sequence() -> None:
    n = np.arange(1, 13, dtype=np.int64)
    assert model.order_sequence(n).tolist() == [1, 2, 4, 6, 9, 12, 16, 20, 25, 30, 36, 42]


def test_objective_matches_the_seeds_best_with_disks_vector() -> None:
    # Seed: c = [2 + 1/2, 0 + 1/4, 1, 0 + 1/9, 2 + 1/12, 1] for root then ceph-journal
    # (ssd-preferring) on an hdd sda and an ssd sdb, `unallocated` last on each disk.
    job = payload(
        [
            partition("root", min_size=10),
            partition("ceph-journal", best_with_disks='yaql=$.disks.where($.type = "ssd")'),
        ],
        disks(("sda", 100, "hdd"), ("sdb", 10, "ssd")),
    )
    assert problem_of(job).objective.tolist() == pytest.approx(
        [2 + 1 / 2, 0 + 1 / 4, 1, 0 + 1 / 9, 2 + 1 / 12, 1], abs=1e-15
    )


def test_equal_requirements_share_a_disk_equally() -> None:
    # The seed's weight example ("no exact size specified"; it writes size: 10 but
    # expects 50/50, i.e. a minimum): root 50, var 50 rather than 90/10.
    job = payload(in_vg(lv("root", min_size=10), lv("var", min_size=10)))
    assert sizes(solve_payload(job)) == {"sda": [50, 50, 0]}


def test_weight_one_half_gives_var_half_the_space_of_root() -> None:
    job = payload(in_vg(lv("root", min_size=10, weight=1), lv("var", min_size=10, weight=0.5)))
    # 66 = 2 × 33 exactly; the 100th MiB cannot be split 2:1 in whole MiB.
    assert sizes(solve_payload(job)) == {"sda": [66, 33, 1]}


def test_ceph_journal_goes_to_the_ssd_and_root_to_the_hdd() -> None:
    job = payload(
        [
            *in_vg(lv("root", min_size=10), vg="os"),
            partition("ceph-journal", best_with_disks='yaql=$.disks.where($.type = "ssd")'),
        ],
        disks(("sda", 100, "hdd"), ("sdb", 10, "ssd")),
    )
    result = solve_payload(job)
    assert sizes(result) == {"sda": [100, 0, 0], "sdb": [0, 10, 0]}
    assert [(p.id, p.disk_id, p.size) for p in result.partitions] == [("ceph-journal", "sdb", 10)]


SWAP_BY_RAM = (
    "yaql=let(ram => $.get(ram, 1024)) -> selectCase($ram <= 2048, $ram > 2048 and "
    "$ram < 8192, $ram > 8192 and $ram < 65536).switchCase($ram * 2, $ram, $ram / 2, 4096)"
)


@pytest.mark.parametrize(
    ("ram", "swap"),
    [(None, 2048), (2048, 4096), (4096, 4096), (16384, 8192), (131072, 4096)],
)
def test_swap_size_follows_the_seeds_ram_rule(ram: int | None, swap: int) -> None:
    hardware = {} if ram is None else {"ram": ram}
    job = payload(
        in_vg(lv("root"), lv("swap", size=SWAP_BY_RAM)), disks(("sda", 200_000)), **hardware
    )
    assert totals(solve_payload(job)) == {"root": 200_000 - swap, "swap": swap, "unallocated": 0}
