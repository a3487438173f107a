"""Every example of seeds/placement-nested-magic.txt ("Getting On The Nested Magic Train").

Where the seed lists one candidate for two groups landing on two providers,
Placement >= 1.34 (and this project, per the reference) returns one entry per
mapping: VIF1→pf1_1/VIF2→pf1_2 and the reverse.
"""

from __future__ import annotations

from typing import Any

from tests.unit.placement.helpers import assert_candidates, find, rp


def fpga_tree() -> list[dict[str, Any]]:
    """The same_subtree model of the seed.

    ::

                    +--------------+
                    | compute node |
                    +-------+------+
                            |
                  +---------+----------+
                  |                    |
        +---------+--------+ +---------+--------+
        | numa0            | | numa1            |
        | VCPU: 4 (2 used) | | VCPU: 4          |
        | MEMORY_MB: 2048  | | MEMORY_MB: 2048  |
        +---+--------------+ +---+----------+---+
            |                    |          |
        +---+----+           +---+---+  +---+---+
        |fpga0_0 |           |fpga1_0|  |fpga1_1|
        |FPGA:1  |           |FPGA:1 |  |FPGA:1 |
        +--------+           +-------+  +-------+
    """
    return [
        rp("cn"),
        rp("numa0", "cn", VCPU=4, MEMORY_MB=2048, used={"VCPU": 2}),
        rp("numa1", "cn", VCPU=4, MEMORY_MB=2048),
        rp("fpga0_0", "numa0", FPGA=1),
        rp("fpga1_0", "numa1", FPGA=1),
        rp("fpga1_1", "numa1", FPGA=1),
    ]


def test_same_subtree_puts_the_fpga_under_the_numa_node_of_the_vcpus() -> None:
    cs = find(
        fpga_tree(),
        "?resources_COMPUTE=VCPU:2,MEMORY_MB:512&resources_ACCEL=FPGA:1"
        "&same_subtree=_COMPUTE,_ACCEL",
    )
    compute = {"VCPU": 2, "MEMORY_MB": 512}
    assert_candidates(
        cs,
        [
            (
                {"numa0": compute, "fpga0_0": {"FPGA": 1}},
                {"_COMPUTE": ["numa0"], "_ACCEL": ["fpga0_0"]},
            ),
            (
                {"numa1": compute, "fpga1_0": {"FPGA": 1}},
                {"_COMPUTE": ["numa1"], "_ACCEL": ["fpga1_0"]},
            ),
            (
                {"numa1": compute, "fpga1_1": {"FPGA": 1}},
                {"_COMPUTE": ["numa1"], "_ACCEL": ["fpga1_1"]},
            ),
        ],
    )


def test_without_same_subtree_the_fpga_may_come_from_the_other_numa_node() -> None:
    cs = find(fpga_tree(), "resources_COMPUTE=VCPU:2,MEMORY_MB:512&resources_ACCEL=FPGA:1")
    assert len(cs.requests) == 6  # 2 NUMA nodes x 3 FPGAs: the seed's "but not" cases too


def nic_tree(vf2: int = 2) -> list[dict[str, Any]]:
    """The resourceless-group model of the seed.

    ::

                    +--------------+
                    | compute node |
                    +-------+------+
                            |
                +-----------+-----------+
                |                       |
          +-----+-----+           +-----+-----+
          |nic1       |           |nic2       |
          |HW_NIC_ROOT|           |HW_NIC_ROOT|
          +-----+-----+           +-----+-----+
                |                       |
           +----+----+            +-----+---+
           |         |            |         |
        +--+--+   +--+--+      +--+--+   +--+--+
        |pf1_1|   |pf1_2|      |pf2_1|   |pf2_2|
        |NET1 |   |NET2 |      |NET1 |   |NET2 |
        |VF:4 |   |VF:4 |      |VF:2 |   |VF:2 |
        +-----+   +-----+      +-----+   +-----+
    """
    return [
        rp("cn"),
        rp("nic1", "cn", traits=["HW_NIC_ROOT"]),
        rp("nic2", "cn", traits=["HW_NIC_ROOT"]),
        rp("pf1_1", "nic1", traits=["NET1"], VF=4),
        rp("pf1_2", "nic1", traits=["NET2"], VF=4),
        rp("pf2_1", "nic2", traits=["NET1"], VF=vf2),
        rp("pf2_2", "nic2", traits=["NET2"], VF=vf2),
    ]


def test_a_resourceless_group_ties_two_vfs_to_the_same_nic() -> None:
    cs = find(
        nic_tree(),
        "?resources_VIF_NET1=VF:1&required_VIF_NET1=NET1"
        "&resources_VIF_NET2=VF:1&required_VIF_NET2=NET2"
        "&required_NIC_AFFINITY=HW_NIC_ROOT"
        "&same_subtree=_VIF_NET1,_VIF_NET2,_NIC_AFFINITY",
    )
    assert_candidates(
        cs,
        [
            (
                {"pf1_1": {"VF": 1}, "pf1_2": {"VF": 1}},
                {"_VIF_NET1": ["pf1_1"], "_VIF_NET2": ["pf1_2"], "_NIC_AFFINITY": ["nic1"]},
            ),
            (
                {"pf2_1": {"VF": 1}, "pf2_2": {"VF": 1}},
                {"_VIF_NET1": ["pf2_1"], "_VIF_NET2": ["pf2_2"], "_NIC_AFFINITY": ["nic2"]},
            ),
        ],
    )


def one_nic_tree() -> list[dict[str, Any]]:
    """The group_policy + same_subtree model (nic2's children are "..." in the seed;
    here it has none).

    ::

                    +--------------+
                    | compute node |
                    +-------+------+
                            |
                +-----------+-----------+
                |                       |
          +-----+-----+           +-----+-----+
          |nic1       |           |nic2       |
          |HW_NIC_ROOT|           |HW_NIC_ROOT|
          +-----+-----+           +-----+-----+
                |                       |
           +----+----+                 ...
           |         |
        +--+--+   +--+--+
        |pf1_1|   |pf1_2|
        |VF:4 |   |VF:4 |
        +-----+   +-----+
    """
    return [
        rp("cn"),
        rp("nic1", "cn", traits=["HW_NIC_ROOT"]),
        rp("nic2", "cn", traits=["HW_NIC_ROOT"]),
        rp("pf1_1", "nic1", VF=4),
        rp("pf1_2", "nic1", VF=4),
    ]


TWO_VFS = (
    "?resources_VIF1=VF:1&resources_VIF2=VF:1&required_NIC_AFFINITY=HW_NIC_ROOT"
    "&same_subtree=_VIF1,_VIF2,_NIC_AFFINITY"
)


def test_isolate_takes_two_vfs_from_different_pfs_of_one_nic() -> None:
    cs = find(one_nic_tree(), TWO_VFS + "&group_policy=isolate")
    one_each = {"pf1_1": {"VF": 1}, "pf1_2": {"VF": 1}}
    assert_candidates(
        cs,
        [
            (one_each, {"_VIF1": ["pf1_1"], "_VIF2": ["pf1_2"], "_NIC_AFFINITY": ["nic1"]}),
            (one_each, {"_VIF1": ["pf1_2"], "_VIF2": ["pf1_1"], "_NIC_AFFINITY": ["nic1"]}),
        ],
    )


def test_group_policy_none_also_lets_both_vfs_come_from_one_pf() -> None:
    cs = find(one_nic_tree(), TWO_VFS + "&group_policy=none")
    one_each = {"pf1_1": {"VF": 1}, "pf1_2": {"VF": 1}}
    assert_candidates(
        cs,
        [
            (one_each, {"_VIF1": ["pf1_1"], "_VIF2": ["pf1_2"], "_NIC_AFFINITY": ["nic1"]}),
            (one_each, {"_VIF1": ["pf1_2"], "_VIF2": ["pf1_1"], "_NIC_AFFINITY": ["nic1"]}),
            (
                {"pf1_1": {"VF": 2}},
                {"_VIF1": ["pf1_1"], "_VIF2": ["pf1_1"], "_NIC_AFFINITY": ["nic1"]},
            ),
            (
                {"pf1_2": {"VF": 2}},
                {"_VIF1": ["pf1_2"], "_VIF2": ["pf1_2"], "_NIC_AFFINITY": ["nic1"]},
            ),
        ],
    )


def test_group_policy_defaults_to_none() -> None:
    assert (
        find(one_nic_tree(), TWO_VFS).requests
        == find(one_nic_tree(), TWO_VFS + "&group_policy=none").requests
    )


def test_isolate_keeps_a_resourceless_suffixed_group_off_the_other_groups_providers() -> None:
    """With isolate, _NUMA (resourceless) may not map to the provider of _COMPUTE."""
    providers = [
        rp("cn"),
        rp("numa0", "cn", traits=["HW_NUMA_ROOT"], VCPU=4),
        rp("pcpu0", "numa0", PCPU=4),
    ]
    request = "resources_COMPUTE=VCPU:1&required_NUMA=HW_NUMA_ROOT&same_subtree=_NUMA,_COMPUTE"
    assert len(find(providers, request).requests) == 1  # _NUMA and _COMPUTE both numa0
    assert find(providers, request + "&group_policy=isolate").requests == []


def test_an_unsuffixed_resourceless_group_is_satisfied_by_any_provider_of_the_tree() -> None:
    """The seed: "If your resourceless request group is unsuffixed, it can be satisfied
    by any provider in the tree" — here the root's provider trait.

    ::

        cn1 (COMPUTE_VOLUME_MULTI_ATTACH)      cn2
          |                                      |
        numa1 VCPU:4                           numa2 VCPU:4
    """
    providers = [
        rp("cn1", traits=["COMPUTE_VOLUME_MULTI_ATTACH"]),
        rp("numa1", "cn1", VCPU=4),
        rp("cn2"),
        rp("numa2", "cn2", VCPU=4),
    ]
    cs = find(
        providers, "required=COMPUTE_VOLUME_MULTI_ATTACH&resources1=VCPU:1&group_policy=isolate"
    )
    assert_candidates(cs, [({"numa1": {"VCPU": 1}}, {"": ["cn1"], "1": ["numa1"]})])
