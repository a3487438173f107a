"""Every example of seeds/placement-provider-trees.txt ("Modeling with Provider Trees")."""

from __future__ import annotations

from typing import Any

from tests.unit.placement.helpers import SHARES, assert_candidates, find, rp

# ---- Sharing Resource Providers ---------------------------------------------------


def flat_sharing() -> list[dict[str, Any]]:
    """::

    +-----------------------------+ +-----------------------------+
    | Sharing Storage (SS1)       | | Sharing Storage (SS2)       |
    | DISK_GB: 1000               | | DISK_GB: 1000               |
    | aggregate: [aggA]           | | aggregate: []               |
    | [MISC_SHARES_VIA_AGGREGATE] | | [MISC_SHARES_VIA_AGGREGATE] |
    +--------------+--------------+ +-----------------------------+
                   | Shared via aggA
    +--------------+--------------+ +-----------------------------+
    | Compute Node (CN1)          | | Compute Node (CN2)          |
    | VCPU: 8, MEMORY_MB: 1024    | | VCPU: 8, MEMORY_MB: 1024    |
    | DISK_GB: 1000               | | DISK_GB: 1000               |
    | aggregate: [aggA]           | | aggregate: []               |
    +-----------------------------+ +-----------------------------+
    """
    return [
        rp("SS1", traits=[SHARES], aggs=["aggA"], DISK_GB=1000),
        rp("SS2", traits=[SHARES], DISK_GB=1000),
        rp("CN1", aggs=["aggA"], VCPU=8, MEMORY_MB=1024, DISK_GB=1000),
        rp("CN2", VCPU=8, MEMORY_MB=1024, DISK_GB=1000),
    ]


REQ = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 500}
CPU_MEM = {"VCPU": 1, "MEMORY_MB": 512}
MEM_DISK = {"MEMORY_MB": 512, "DISK_GB": 500}
VCPU = {"VCPU": 1}
DISK = {"DISK_GB": 500}


def test_a_sharing_provider_serves_only_trees_in_its_aggregate() -> None:
    cs = find(flat_sharing(), "resources=VCPU:1,MEMORY_MB:512,DISK_GB:500")
    assert_candidates(
        cs,
        [
            ({"CN1": REQ}, {"": ["CN1"]}),
            ({"CN2": REQ}, {"": ["CN2"]}),
            ({"CN1": CPU_MEM, "SS1": DISK}, {"": ["CN1", "SS1"]}),
        ],
    )


def nested_sharing() -> list[dict[str, Any]]:
    """::

                      +------------------------------+
                      | Sharing Storage (SS1)        |
                      | DISK_GB: 1000, agg: [aggA]   |
                      | [MISC_SHARES_VIA_AGGREGATE]  |
                      +--------------+---------------+
                                     | aggA
    +--------------------------------+--------------------------------+
    | Compute Node (CN1)             |  Compute Node (CN2)            |
    | MEMORY_MB: 1024, DISK_GB: 1000 |  MEMORY_MB: 1024, DISK_GB: 1000|
    | agg: [aggA, aggB]              |  agg: [aggA]                   |
    +------+-----------------+-------+-------+-----------------+------+
           |                 |               |                 |
    +------+------+  +-------+-----+  +------+------+  +-------+-----+
    | NUMA1_1     |  | NUMA1_2     |  | NUMA2_1     |  | NUMA2_2     |
    | VCPU: 8     |  | VCPU: 8     |  | VCPU: 8     |  | VCPU: 8     |
    | agg: []     |  | agg: []     |  | agg: [aggB] |  | agg: []     |
    +-------------+  +-------------+  +-------------+  +-------------+
    """
    return [
        rp("SS1", traits=[SHARES], aggs=["aggA"], DISK_GB=1000),
        rp("CN1", aggs=["aggA", "aggB"], MEMORY_MB=1024, DISK_GB=1000),
        rp("NUMA1_1", "CN1", VCPU=8),
        rp("NUMA1_2", "CN1", VCPU=8),
        rp("CN2", aggs=["aggA"], MEMORY_MB=1024, DISK_GB=1000),
        rp("NUMA2_1", "CN2", aggs=["aggB"], VCPU=8),
        rp("NUMA2_2", "CN2", VCPU=8),
    ]


EIGHT = [
    ({"NUMA1_1": VCPU, "CN1": MEM_DISK}, {"": ["NUMA1_1", "CN1"]}),
    ({"NUMA1_2": VCPU, "CN1": MEM_DISK}, {"": ["NUMA1_2", "CN1"]}),
    ({"NUMA2_1": VCPU, "CN2": MEM_DISK}, {"": ["NUMA2_1", "CN2"]}),
    ({"NUMA2_2": VCPU, "CN2": MEM_DISK}, {"": ["NUMA2_2", "CN2"]}),
    ({"NUMA1_1": VCPU, "CN1": {"MEMORY_MB": 512}, "SS1": DISK}, {"": ["NUMA1_1", "CN1", "SS1"]}),
    ({"NUMA1_2": VCPU, "CN1": {"MEMORY_MB": 512}, "SS1": DISK}, {"": ["NUMA1_2", "CN1", "SS1"]}),
    ({"NUMA2_1": VCPU, "CN2": {"MEMORY_MB": 512}, "SS1": DISK}, {"": ["NUMA2_1", "CN2", "SS1"]}),
    ({"NUMA2_2": VCPU, "CN2": {"MEMORY_MB": 512}, "SS1": DISK}, {"": ["NUMA2_2", "CN2", "SS1"]}),
]


def test_a_sharing_provider_serves_the_whole_tree_of_a_provider_in_its_aggregate() -> None:
    cs = find(nested_sharing(), "resources=VCPU:1,MEMORY_MB:512,DISK_GB:500")
    assert_candidates(cs, EIGHT)


def test_an_aggregate_on_the_root_spans_the_whole_tree() -> None:
    cs = find(nested_sharing(), "resources=VCPU:1,MEMORY_MB:512,DISK_GB:500&member_of=aggA")
    assert_candidates(cs, EIGHT)


def test_an_aggregate_on_a_child_does_not_span_the_tree() -> None:
    cs = find(nested_sharing(), "resources=VCPU:1,MEMORY_MB:512,DISK_GB:500&member_of=aggB")
    assert_candidates(cs, EIGHT[:2])


# ---- Filtering by Traits ----------------------------------------------------------


def nic_host() -> list[dict[str, Any]]:
    """::

    +----------------------------------------------------+
    | Compute Node (CN1)                                 |
    | VCPU: 8, MEMORY_MB: 1024, DISK_GB: 1000            |
    +----------+------------------------+----------------+
               | nested                 | nested
    +----------+-----------+ +----------+----------+
    | NIC1_1               | | NIC1_2              |
    | SRIOV_NET_VF:8       | | SRIOV_NET_VF:8      |
    | [HW_NIC_ACCEL_SSL]   | | []                  |
    +----------------------+ +---------------------+
    """
    return [
        rp("CN1", VCPU=8, MEMORY_MB=1024, DISK_GB=1000),
        rp("NIC1_1", "CN1", traits=["HW_NIC_ACCEL_SSL"], SRIOV_NET_VF=8),
        rp("NIC1_2", "CN1", SRIOV_NET_VF=8),
    ]


WITH_VF = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:500,SRIOV_NET_VF:2"


def test_a_required_trait_must_be_on_a_provider_that_gives_resources() -> None:
    cs = find(nic_host(), WITH_VF + "&required=HW_NIC_ACCEL_SSL")
    assert_candidates(cs, [({"CN1": REQ, "NIC1_1": {"SRIOV_NET_VF": 2}}, {"": ["CN1", "NIC1_1"]})])


def test_a_forbidden_trait_excludes_its_provider() -> None:
    cs = find(nic_host(), WITH_VF + "&required=!HW_NIC_ACCEL_SSL")
    assert_candidates(cs, [({"CN1": REQ, "NIC1_2": {"SRIOV_NET_VF": 2}}, {"": ["CN1", "NIC1_2"]})])


def test_traits_not_requested_are_ignored() -> None:
    cs = find(nic_host(), WITH_VF)
    assert_candidates(
        cs,
        [
            ({"CN1": REQ, "NIC1_1": {"SRIOV_NET_VF": 2}}, {"": ["CN1", "NIC1_1"]}),
            ({"CN1": REQ, "NIC1_2": {"SRIOV_NET_VF": 2}}, {"": ["CN1", "NIC1_2"]}),
        ],
    )


GRANULAR = (
    "resources=VCPU:1,MEMORY_MB:512,DISK_GB:500"
    "&resources1=SRIOV_NET_VF:1&required1=HW_NIC_ACCEL_SSL&resources2=SRIOV_NET_VF:1"
)


def test_granular_groups_with_isolate_use_two_nics() -> None:
    cs = find(nic_host(), GRANULAR + "&group_policy=isolate")
    assert_candidates(
        cs,
        [
            (
                {"CN1": REQ, "NIC1_1": {"SRIOV_NET_VF": 1}, "NIC1_2": {"SRIOV_NET_VF": 1}},
                {"": ["CN1"], "1": ["NIC1_1"], "2": ["NIC1_2"]},
            )
        ],
    )


def test_granular_groups_without_isolate_may_share_a_nic() -> None:
    cs = find(nic_host(), GRANULAR + "&group_policy=none")
    assert_candidates(
        cs,
        [
            (
                {"CN1": REQ, "NIC1_1": {"SRIOV_NET_VF": 1}, "NIC1_2": {"SRIOV_NET_VF": 1}},
                {"": ["CN1"], "1": ["NIC1_1"], "2": ["NIC1_2"]},
            ),
            (
                {"CN1": REQ, "NIC1_1": {"SRIOV_NET_VF": 2}},
                {"": ["CN1"], "1": ["NIC1_1"], "2": ["NIC1_1"]},
            ),
        ],
    )


# ---- Filtering by Tree ------------------------------------------------------------


def two_hosts_two_storages() -> list[dict[str, Any]]:
    """::

    +-----------------------+      +-----------------------+
    | Sharing Storage (SS1) |      | Sharing Storage (SS2) |
    | DISK_GB: 1000         |      | DISK_GB: 1000         |
    +-----------+-----------+      +-----------+-----------+
                +------------------+-----------+
                                   | Shared via an aggregate
                +------------------+-----------+
    +-----------+-----------+      +-----------+-----------+
    | Compute Node (CN1)    |      | Compute Node (CN2)    |
    | DISK_GB: 1000         |      | DISK_GB: 1000         |
    +-----+-----------+-----+      +-----+-----------+-----+
          |           |                  |           |
    +-----+----+ +----+-----+      +-----+----+ +----+-----+
    | NUMA1_1  | | NUMA1_2  |      | NUMA2_1  | | NUMA2_2  |
    | VCPU: 4  | | VCPU: 4  |      | VCPU: 4  | | VCPU: 4  |
    +----------+ +----------+      +----------+ +----------+
    """
    return [
        rp("SS1", traits=[SHARES], aggs=["agg"], DISK_GB=1000),
        rp("SS2", traits=[SHARES], aggs=["agg"], DISK_GB=1000),
        rp("CN1", aggs=["agg"], DISK_GB=1000),
        rp("NUMA1_1", "CN1", VCPU=4),
        rp("NUMA1_2", "CN1", VCPU=4),
        rp("CN2", aggs=["agg"], DISK_GB=1000),
        rp("NUMA2_1", "CN2", VCPU=4),
        rp("NUMA2_2", "CN2", VCPU=4),
    ]


IN_CN1 = [
    ({"NUMA1_1": VCPU, "CN1": {"DISK_GB": 50}}, {"": ["NUMA1_1", "CN1"]}),
    ({"NUMA1_2": VCPU, "CN1": {"DISK_GB": 50}}, {"": ["NUMA1_2", "CN1"]}),
]


def test_in_tree_keeps_the_unsuffixed_group_in_one_tree_without_sharing() -> None:
    assert_candidates(
        find(two_hosts_two_storages(), "resources=VCPU:1,DISK_GB:50&in_tree=CN1"), IN_CN1
    )


def test_in_tree_of_a_child_means_its_whole_tree() -> None:
    assert_candidates(
        find(two_hosts_two_storages(), "resources=VCPU:1,DISK_GB:50&in_tree=NUMA1_1"), IN_CN1
    )


def test_an_unsuffixed_in_tree_does_not_restrict_a_suffixed_group() -> None:
    cs = find(two_hosts_two_storages(), "resources=VCPU:1&in_tree=CN1&resources1=DISK_GB:10")
    disk = {"DISK_GB": 10}
    assert_candidates(
        cs,
        [
            ({"NUMA1_1": VCPU, disk_at: disk}, {"": ["NUMA1_1"], "1": [disk_at]})
            for disk_at in ("CN1", "SS1", "SS2")
        ]
        + [
            ({"NUMA1_2": VCPU, disk_at: disk}, {"": ["NUMA1_2"], "1": [disk_at]})
            for disk_at in ("CN1", "SS1", "SS2")
        ],
    )


def test_a_suffixed_in_tree_sticks_to_one_sharing_provider() -> None:
    cs = find(two_hosts_two_storages(), "resources=VCPU:1&resources1=DISK_GB:10&in_tree1=SS1")
    assert_candidates(
        cs,
        [
            ({numa: VCPU, "SS1": {"DISK_GB": 10}}, {"": [numa], "1": ["SS1"]})
            for numa in ("NUMA1_1", "NUMA1_2", "NUMA2_1", "NUMA2_2")
        ],
    )


def test_two_suffixed_in_trees_pick_the_host_and_the_storage() -> None:
    cs = find(
        two_hosts_two_storages(),
        "resources1=VCPU:1&in_tree1=CN1&resources2=DISK_GB:10&in_tree2=SS1&group_policy=isolate",
    )
    assert_candidates(
        cs,
        [
            ({numa: VCPU, "SS1": {"DISK_GB": 10}}, {"1": [numa], "2": ["SS1"]})
            for numa in ("NUMA1_1", "NUMA1_2")
        ],
    )


# ---- Filtering by Root Provider Traits --------------------------------------------


def numa_and_non_numa() -> list[dict[str, Any]]:
    """::

    +---------------------------------+ +-------------------------------------------+
    | Compute Node (NON_NUMA_CN)      | | Compute Node (NUMA_CN)                    |
    | VCPU: 8, MEMORY_MB: 1024,       | | DISK_GB: 1000                             |
    | DISK_GB: 1000                   | | traits: STORAGE_DISK_SSD,                 |
    | traits: HW_CPU_X86_AVX2,        | |   COMPUTE_VOLUME_MULTI_ATTACH             |
    |   STORAGE_DISK_SSD,             | +-------+-------------------+---------------+
    |   COMPUTE_VOLUME_MULTI_ATTACH,  |         |                   |
    |   CUSTOM_WINDOWS_LICENSE_POOL   | +-------+---------+ +-------+---------+
    +---------------------------------+ | NUMA1           | | NUMA2           |
                                        | VCPU: 4         | | VCPU: 4         |
                                        | MEMORY_MB: 1024 | | MEMORY_MB: 1024 |
                                        |                 | | HW_CPU_X86_AVX2 |
                                        +-----------------+ +-----------------+
    """
    return [
        rp(
            "NON_NUMA_CN",
            traits=[
                "HW_CPU_X86_AVX2",
                "STORAGE_DISK_SSD",
                "COMPUTE_VOLUME_MULTI_ATTACH",
                "CUSTOM_WINDOWS_LICENSE_POOL",
            ],
            VCPU=8,
            MEMORY_MB=1024,
            DISK_GB=1000,
        ),
        rp("NUMA_CN", traits=["STORAGE_DISK_SSD", "COMPUTE_VOLUME_MULTI_ATTACH"], DISK_GB=1000),
        rp("NUMA1", "NUMA_CN", VCPU=4, MEMORY_MB=1024),
        rp("NUMA2", "NUMA_CN", traits=["HW_CPU_X86_AVX2"], VCPU=4, MEMORY_MB=1024),
    ]


def test_root_required_keeps_hosts_whose_root_has_the_trait() -> None:
    cs = find(
        numa_and_non_numa(),
        "resources1=VCPU:1,MEMORY_MB:512&required1=HW_CPU_X86_AVX2&resources2=DISK_GB:100"
        "&group_policy=none&root_required=COMPUTE_VOLUME_MULTI_ATTACH",
    )
    assert_candidates(
        cs,
        [
            (
                {"NON_NUMA_CN": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 100}},
                {"1": ["NON_NUMA_CN"], "2": ["NON_NUMA_CN"]},
            ),
            (
                {"NUMA_CN": {"DISK_GB": 100}, "NUMA2": CPU_MEM},
                {"1": ["NUMA2"], "2": ["NUMA_CN"]},
            ),
        ],
    )


def test_a_forbidden_root_trait_drops_the_whole_host() -> None:
    cs = find(
        numa_and_non_numa(),
        "resources1=VCPU:1,MEMORY_MB:512&resources2=DISK_GB:100"
        "&group_policy=none&root_required=!CUSTOM_WINDOWS_LICENSE_POOL",
    )
    assert_candidates(
        cs,
        [
            ({"NUMA_CN": {"DISK_GB": 100}, numa: CPU_MEM}, {"1": [numa], "2": ["NUMA_CN"]})
            for numa in ("NUMA1", "NUMA2")
        ],
    )


# ---- Filtering by Same Subtree ----------------------------------------------------


def fpga_host() -> list[dict[str, Any]]:
    """::

                     +---------------------------+
                     | Compute Node (CN)         |
                     +-------------+-------------+
                                   |
              +--------------------+-------------------+
              |                                        |
    +---------+-------------+              +-----------+-----------+
    | NUMA NODE (NUMA0)     |              | NUMA NODE (NUMA1)     |
    | VCPU: 4               |              | VCPU: 4               |
    | MEMORY_MB: 2048       |              | MEMORY_MB: 2048       |
    | traits: HW_NUMA_ROOT  |              | traits: HW_NUMA_ROOT  |
    +---------+-------------+              +----+-------------+----+
              |                                 |             |
    +---------+-------------+     +-------------+-----+ +-----+-------------+
    | FPGA (FPGA0_0)        |     | FPGA (FPGA1_0)    | | FPGA (FPGA1_1)    |
    | ACCELERATOR_FPGA:1    |     | ACCELERATOR_FPGA:1| | ACCELERATOR_FPGA:1|
    | traits: CUSTOM_TYPE1  |     | CUSTOM_TYPE1      | | CUSTOM_TYPE2      |
    +-----------------------+     +-------------------+ +-------------------+
    """
    return [
        rp("CN"),
        rp("NUMA0", "CN", traits=["HW_NUMA_ROOT"], VCPU=4, MEMORY_MB=2048),
        rp("NUMA1", "CN", traits=["HW_NUMA_ROOT"], VCPU=4, MEMORY_MB=2048),
        rp("FPGA0_0", "NUMA0", traits=["CUSTOM_TYPE1"], ACCELERATOR_FPGA=1),
        rp("FPGA1_0", "NUMA1", traits=["CUSTOM_TYPE1"], ACCELERATOR_FPGA=1),
        rp("FPGA1_1", "NUMA1", traits=["CUSTOM_TYPE2"], ACCELERATOR_FPGA=1),
    ]


def test_same_subtree_keeps_fpgas_on_the_numa_node_of_the_cpus() -> None:
    cs = find(
        fpga_host(),
        "resources_COMPUTE=VCPU:1,MEMORY_MB:256&resources_ACCEL=ACCELERATOR_FPGA:1"
        "&group_policy=none&same_subtree=_COMPUTE,_ACCEL",
    )
    compute = {"VCPU": 1, "MEMORY_MB": 256}
    fpga = {"ACCELERATOR_FPGA": 1}
    assert_candidates(
        cs,
        [
            ({"NUMA0": compute, "FPGA0_0": fpga}, {"_COMPUTE": ["NUMA0"], "_ACCEL": ["FPGA0_0"]}),
            ({"NUMA1": compute, "FPGA1_0": fpga}, {"_COMPUTE": ["NUMA1"], "_ACCEL": ["FPGA1_0"]}),
            ({"NUMA1": compute, "FPGA1_1": fpga}, {"_COMPUTE": ["NUMA1"], "_ACCEL": ["FPGA1_1"]}),
        ],
    )


def test_a_resourceless_numa_group_ties_two_different_fpgas_together() -> None:
    cs = find(
        fpga_host(),
        "required_NUMA=HW_NUMA_ROOT"
        "&resources_ACCEL1=ACCELERATOR_FPGA:1&required_ACCEL1=CUSTOM_TYPE1"
        "&resources_ACCEL2=ACCELERATOR_FPGA:1&required_ACCEL2=CUSTOM_TYPE2"
        "&group_policy=none&same_subtree=_NUMA,_ACCEL1,_ACCEL2",
    )
    fpga = {"ACCELERATOR_FPGA": 1}
    assert_candidates(
        cs,
        [
            (
                {"FPGA1_0": fpga, "FPGA1_1": fpga},
                {"_NUMA": ["NUMA1"], "_ACCEL1": ["FPGA1_0"], "_ACCEL2": ["FPGA1_1"]},
            )
        ],
    )
    # The resourceless group's provider is mapped but not allocated.
    assert "NUMA1" not in cs.requests[0]["allocations"]
