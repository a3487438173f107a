"""Semantics beyond the seed examples: Placement defects not copied, limits and caps,
summaries, empty answers, the solver's result."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from apportion.contracts.launch import LaunchSelectResult
from apportion.engine import Context, run
from apportion.errors import Infeasible
from apportion.limits import Limits
from apportion.placement import solve
from tests.unit.placement.helpers import SHARES, assert_candidates, find, make_job, rp


def shared_disk_farm() -> list[dict[str, Any]]:
    """Two hosts sharing one storage provider through aggregate "agg".

    ::

                 +----------------------------+
                 | SS  DISK_GB: 100           |
                 | MISC_SHARES_VIA_AGGREGATE  |
                 +-------------+--------------+
                               | agg
                 +-------------+--------------+
        +--------+-------+            +-------+--------+
        | CN1  VCPU: 4   |            | CN2  VCPU: 4   |
        +----------------+            +----------------+
    """
    return [
        rp("SS", traits=[SHARES], aggs=["agg"], DISK_GB=100),
        rp("CN1", aggs=["agg"], VCPU=4),
        rp("CN2", aggs=["agg"], VCPU=4),
    ]


def test_every_tree_anchors_candidates_when_the_unsuffixed_group_uses_only_a_sharing_provider() -> (
    None
):
    """Placement keeps one unsuffixed request for SS (its anchor forgotten), so only
    one host survives the merge; both are valid."""
    cs = find(shared_disk_farm(), "resources=DISK_GB:10&resources1=VCPU:1")
    assert_candidates(
        cs,
        [
            ({"SS": {"DISK_GB": 10}, "CN1": {"VCPU": 1}}, {"": ["SS"], "1": ["CN1"]}),
            ({"SS": {"DISK_GB": 10}, "CN2": {"VCPU": 1}}, {"": ["SS"], "1": ["CN2"]}),
        ],
    )
    assert cs.anchors == ["CN1", "CN2"]
    assert [r["account"] for r in cs.requests] == ["CN1", "CN2"]


def test_a_candidate_of_sharing_providers_only_is_returned_once_anchored_at_its_own_tree() -> None:
    cs = find(shared_disk_farm(), "resources=DISK_GB:10")
    assert_candidates(cs, [({"SS": {"DISK_GB": 10}}, {"": ["SS"]})])
    assert cs.anchors == ["SS"]
    assert cs.requests[0]["account"] == "SS"


def test_amounts_add_up_to_exactly_what_was_requested() -> None:
    """Placement reports 3 VCPU for ``resources=VCPU:1&resources1=VCPU:1`` on such a
    root; here every candidate holds exactly 2.

    ::

              cn
            /    \\
        c1 VCPU:4  c2 VCPU:4
    """
    providers = [rp("cn"), rp("c1", "cn", VCPU=4), rp("c2", "cn", VCPU=4)]
    for policy in ("none", "isolate"):
        cs = find(providers, f"resources=VCPU:1&resources1=VCPU:1&group_policy={policy}")
        assert_candidates(
            cs,
            [
                ({"c1": {"VCPU": 2}}, {"": ["c1"], "1": ["c1"]}),
                ({"c2": {"VCPU": 2}}, {"": ["c2"], "1": ["c2"]}),
                ({"c1": {"VCPU": 1}, "c2": {"VCPU": 1}}, {"": ["c1"], "1": ["c2"]}),
                ({"c1": {"VCPU": 1}, "c2": {"VCPU": 1}}, {"": ["c2"], "1": ["c1"]}),
            ],
        )


def test_summed_amounts_on_one_provider_are_checked_against_capacity_and_max_unit() -> None:
    providers = [
        rp("cn"),
        rp("c1", "cn", inv={"VCPU": {"total": 8, "max_unit": 3}}, used={"VCPU": 4}),
        rp("c2", "cn", VCPU=1),
    ]
    cs = find(providers, "resources_A=VCPU:2&resources_B=VCPU:1")
    # c1 has 4 free but max_unit 3: A+B=3 fits there; c2 only takes B.
    assert_candidates(
        cs,
        [
            ({"c1": {"VCPU": 3}}, {"_A": ["c1"], "_B": ["c1"]}),
            ({"c1": {"VCPU": 2}, "c2": {"VCPU": 1}}, {"_A": ["c1"], "_B": ["c2"]}),
        ],
    )
    assert find(providers, "resources_A=VCPU:2&resources_B=VCPU:2").requests == []


def test_a_resourceless_group_with_only_in_tree_maps_a_provider_of_that_tree() -> None:
    """Placement matches nothing here.

    ::

        cn1                 cn2
         |                   |
        numa1 VCPU:2        numa2 VCPU:2
    """
    providers = [rp("cn1"), rp("numa1", "cn1", VCPU=2), rp("cn2"), rp("numa2", "cn2", VCPU=2)]
    cs = find(providers, "resources_C=VCPU:1&in_tree_T=cn1&same_subtree=_C,_T")
    assert_candidates(
        cs,
        [
            ({"numa1": {"VCPU": 1}}, {"_C": ["numa1"], "_T": ["cn1"]}),
            ({"numa1": {"VCPU": 1}}, {"_C": ["numa1"], "_T": ["numa1"]}),
        ],
    )


def test_repeated_required_keys_are_anded_and_in_means_any_of() -> None:
    providers = [
        rp("a", traits=["T1", "T3"], VCPU=1),
        rp("b", traits=["T2", "T3"], VCPU=1),
        rp("c", traits=["T2"], VCPU=1),
        rp("d", traits=["T1", "T3", "T4"], VCPU=1),
    ]
    cs = find(providers, "resources=VCPU:1&required=in:T1,T2&required=T3,!T4")
    assert sorted(next(iter(r["allocations"])) for r in cs.requests) == ["a", "b"]


def test_member_of_in_and_forbidden_aggregates() -> None:
    providers = [
        rp("a", aggs=["g1"], VCPU=1),
        rp("b", aggs=["g2"], VCPU=1),
        rp("c", aggs=["g1", "g3"], VCPU=1),
        rp("d", VCPU=1),
    ]

    def hosts(query: str) -> list[str]:
        return sorted(next(iter(r["allocations"])) for r in find(providers, query).requests)

    assert hosts("resources=VCPU:1&member_of=in:g1,g2") == ["a", "b", "c"]
    assert hosts("resources=VCPU:1&member_of=in:g1,g2&member_of=!g3") == ["a", "b"]
    assert hosts("resources=VCPU:1&member_of=!in:g1,g2") == ["d"]
    assert hosts("resources_X=VCPU:1&member_of_X=g1&member_of_X=g3") == ["c"]


def test_a_forbidden_aggregate_on_the_root_excludes_the_whole_tree_for_the_unsuffixed_group() -> (
    None
):
    providers = [
        rp("cn", aggs=["bad"]),
        rp("numa", "cn", VCPU=2),
        rp("cn2"),
        rp("numa2", "cn2", VCPU=2),
    ]
    assert [r["account"] for r in find(providers, "resources=VCPU:1&member_of=!bad").requests] == [
        "cn2"
    ]
    # A suffixed group looks only at its own provider.
    assert len(find(providers, "resources1=VCPU:1&member_of1=!bad").requests) == 2


@pytest.mark.parametrize(
    "query",
    [
        "resources=VCPU:1&in_tree=nowhere",
        "resources=VCPU:1&member_of=no-such-aggregate",
        "resources=VCPU:100",
        "resources=NO_SUCH_CLASS:1",
        "resources=VCPU:1&required=NO_SUCH_TRAIT",
        "resources=VCPU:1&root_required=NO_SUCH_TRAIT",
    ],
)
def test_an_empty_answer_is_infeasible_not_an_error(query: str) -> None:
    job = make_job(shared_disk_farm(), query)
    with pytest.raises(Infeasible, match=r"^no allocation candidates$"):
        solve(job, Context())
    env = run("launch_select", job.model_dump(mode="json"))
    assert env.status == "infeasible"
    assert env.error is not None
    assert env.error.message == "no allocation candidates"


# ---- limits, caps and breadth-first spreading -------------------------------------


def rack(hosts: int, children: int = 2) -> list[dict[str, Any]]:
    providers = []
    for h in range(hosts):
        providers.append(rp(f"cn{h}"))
        providers += [rp(f"cn{h}-numa{c}", f"cn{h}", VCPU=4) for c in range(children)]
    return providers


def test_limit_takes_candidates_from_every_tree_in_turn() -> None:
    cs = find(rack(5), "resources=VCPU:1&limit=7")
    assert cs.anchors == ["cn0", "cn1", "cn2", "cn3", "cn4", "cn0", "cn1"]
    assert not cs.capped
    # Only the trees of returned candidates are summarised.
    assert set(cs.provider_summaries) == {
        f"cn{h}{s}" for h in range(5) for s in ("", "-numa0", "-numa1")
    }


def test_the_global_cap_cuts_the_answer_and_says_so() -> None:
    cs = find(rack(5), "resources=VCPU:1", Limits(max_candidates=4))
    assert len(cs.requests) == 4
    assert cs.anchors == ["cn0", "cn1", "cn2", "cn3"]
    assert cs.capped
    assert cs.extra() == {"capped": True, "max_candidates": 4}


def test_an_answer_of_exactly_the_cap_is_not_capped() -> None:
    cs = find(rack(2), "resources=VCPU:1", Limits(max_candidates=4))
    assert len(cs.requests) == 4
    assert not cs.capped


def test_a_limit_below_the_cap_is_not_a_cap() -> None:
    cs = find(rack(5), "resources=VCPU:1&limit=3", Limits(max_candidates=4))
    assert len(cs.requests) == 3
    assert not cs.capped


def test_a_limit_above_the_cap_is_capped() -> None:
    cs = find(rack(5), "resources=VCPU:1&limit=9", Limits(max_candidates=4))
    assert len(cs.requests) == 4
    assert cs.capped


def test_isolated_groups_that_outnumber_the_providers_fail_fast() -> None:
    """7 isolated single-unit groups over 6 single-unit children: a matching check
    proves it impossible instead of trying 6! partial assignments."""
    providers = [rp("cn")] + [rp(f"gpu{i}", "cn", VGPU=1) for i in range(6)]
    query = "&".join(f"resources{i}=VGPU:1" for i in range(7)) + "&group_policy=isolate"
    assert find(providers, query, Limits(max_candidate_search_steps=10)).requests == []


def test_the_search_budget_stops_a_hopeless_search() -> None:
    """Capacity makes 7 groups on 6 single-unit children impossible, but only the last
    group finds out; the step budget stops the search."""
    providers = [rp("cn")] + [rp(f"gpu{i}", "cn", VGPU=1) for i in range(6)]
    query = "&".join(f"resources{i}=VGPU:1" for i in range(7))
    cs = find(providers, query, Limits(max_candidate_search_steps=1000))
    assert cs.requests == []
    assert cs.search_exhausted
    with pytest.raises(Infeasible) as info:
        solve(make_job(providers, query), Context(limits=Limits(max_candidate_search_steps=1000)))
    assert info.value.message == "no allocation candidates"
    assert info.value.problems[0].path == "request"


def test_symmetric_isolated_groups_give_every_permutation() -> None:
    providers = [rp("cn")] + [rp(f"gpu{i}", "cn", VGPU=1) for i in range(4)]
    query = "&".join(f"resources{i}=VGPU:1" for i in range(3)) + "&group_policy=isolate"
    assert len(find(providers, query).requests) == 4 * 3 * 2


# ---- summaries and the wire result -------------------------------------------------


def test_summaries_cover_whole_trees_including_providers_without_inventory() -> None:
    """::

    CN1 VCPU:4 (2 used)       other VCPU:4
     |
    numa (HW_NUMA_ROOT, no inventory)
    """
    providers = [
        rp("CN1", VCPU=4, used={"VCPU": 2}),
        rp("numa", "CN1", traits=["HW_NUMA_ROOT"]),
        rp("other", VCPU=4),
    ]
    cs = find(providers, "resources=VCPU:1&in_tree=CN1")
    assert len(cs.requests) == 1
    summaries = cs.provider_summaries
    assert summaries == {
        "CN1": {
            "resources": {"VCPU": {"capacity": 4, "used": 2}},
            "traits": [],
            "parent_provider_uuid": None,
            "root_provider_uuid": "CN1",
        },
        "numa": {
            "resources": {},
            "traits": ["HW_NUMA_ROOT"],
            "parent_provider_uuid": "CN1",
            "root_provider_uuid": "CN1",
        },
    }


def test_summaries_include_the_sharing_providers_tree_and_all_classes() -> None:
    providers = shared_disk_farm()
    providers[1]["inventories"]["MEMORY_MB"] = {"total": 512}
    cs = find(providers, "resources=VCPU:1,DISK_GB:5&in_tree=CN1&limit=1")
    assert cs.requests == []  # in_tree keeps the unsuffixed group off the sharing provider
    cs = find(providers, "resources=VCPU:1,DISK_GB:5")
    assert set(cs.provider_summaries) == {"SS", "CN1", "CN2"}
    assert cs.provider_summaries["CN1"]["resources"]["MEMORY_MB"]["capacity"] == 512
    assert cs.provider_summaries["SS"]["traits"] == [SHARES]


def test_the_solver_returns_a_wire_result_without_selection() -> None:
    job = make_job(shared_disk_farm(), "resources=VCPU:1&resources1=DISK_GB:1")
    result = solve(job, Context())
    assert TypeAdapter(LaunchSelectResult).validate_python(result) == result
    assert result["selection"] is None
    assert result["extra"] == {"capped": False, "max_candidates": 10_000}
    dumped = result["allocation_requests"][0]
    assert dumped == {
        "allocations": {"CN1": {"resources": {"VCPU": 1}}, "SS": {"resources": {"DISK_GB": 1}}},
        "mappings": {"": ["CN1"], "1": ["SS"]},
        "account": "CN1",
        "priority_group": None,
        "probability": None,
        "cost_per_hour": None,
    }


def test_the_price_of_a_candidate_sums_amount_times_unit_price() -> None:
    providers = shared_disk_farm()
    providers[0]["prices"] = {"DISK_GB": 0.01}
    providers[1]["prices"] = {"VCPU": 0.5}
    cs = find(providers, "resources=VCPU:2,DISK_GB:10")
    by_anchor = dict(zip(cs.anchors, cs.costs({}), strict=True))
    assert by_anchor == {"CN1": pytest.approx(1.1), "CN2": pytest.approx(0.1)}


def test_repeats_of_a_shared_only_candidate_across_many_trees_are_bounded() -> None:
    """Two disk groups served by 3 storages, 300 hosts: 9 distinct candidates, each
    also produced by every host; the repeats spend the step budget, so a huge
    cloud cannot make the search run unbounded."""
    providers = [rp(f"SS{i}", traits=[SHARES], aggs=["agg"], DISK_GB=100) for i in range(3)]
    providers += [rp(f"cn{h}", aggs=["agg"]) for h in range(300)]
    query = "resources_A=DISK_GB:1&resources_B=DISK_GB:1"
    full = find(providers, query)
    assert len(full.requests) == 9
    assert set(full.anchors) == {"SS0", "SS1", "SS2"}  # each at a storage it uses
    assert not full.search_exhausted
    cut = find(providers, query, Limits(max_candidate_search_steps=200))
    assert cut.search_exhausted
    assert 0 < len(cut.requests) < 9
