"""Where answers once differed from OpenStack Placement's own: odd inventories, repeated
request-wide keys, and the order of a mapping's providers.

Each expected answer is worked out by hand from Placement's rules (in the docstring),
not by running the engine.
"""

from __future__ import annotations

from typing import Any

import pytest

from apportion.codec import encode
from apportion.engine import Context, run
from apportion.errors import Infeasible
from apportion.placement import solve
from tests.unit.placement.helpers import SHARES, assert_candidates, find, make_job, rejection, rp


def hosts_one_with(odd: dict[str, Any]) -> list[dict[str, Any]]:
    """Two hosts; cn1's VCPU inventory is ``odd``.

    ::

        +------------------+      +------------------+
        | cn1  VCPU: odd   |      | cn2  VCPU: 4     |
        +------------------+      +------------------+
    """
    return [rp("cn1", inv={"VCPU": odd}), rp("cn2", VCPU=4)]


# ---- an inventory that fits nothing --------------------------------------------------


def test_an_inventory_whose_min_unit_exceeds_its_max_unit_fits_no_request_and_is_named() -> None:
    """cn1: VCPU total 4, min_unit 3, max_unit 2. An amount a fits a provider only if
    min_unit <= a <= max_unit: 3 <= a <= 2 has no solution, so cn1 takes no VCPU at
    all, and the job is answered (Placement accepts such an inventory) with cn2 only.
    """
    providers = hosts_one_with({"total": 4, "min_unit": 3, "max_unit": 2})
    cs = find(providers, "resources=VCPU:2")
    assert_candidates(cs, [({"cn2": {"VCPU": 2}}, {"": ["cn2"]})])
    assert cs.extra()["unusable_inventories"] == [
        {
            "provider": "cn1",
            "resource_class": "VCPU",
            "reason": "min_unit (3) exceeds max_unit (2): this inventory fits no request",
        }
    ]
    assert cs.extra()["unusable_inventory_count"] == 1


def test_an_inventory_whose_min_unit_exceeds_its_capacity_fits_no_request_and_is_named() -> None:
    """cn1: VCPU total 4, reserved 2, min_unit 3. Capacity (4 - 2) x 1.0 = 2, so any
    amount a >= 3 exceeds it: nothing fits cn1, even VCPU:3 which max_unit (4) allows.
    """
    providers = hosts_one_with({"total": 4, "reserved": 2, "min_unit": 3})
    cs = find(providers, "resources=VCPU:3")
    assert_candidates(cs, [({"cn2": {"VCPU": 3}}, {"": ["cn2"]})])
    [named] = cs.extra()["unusable_inventories"]
    assert named["provider"] == "cn1"
    assert (
        named["reason"] == "min_unit (3) exceeds its capacity (2): this inventory fits no request"
    )


def test_a_job_whose_only_fitting_provider_is_unusable_is_infeasible_and_says_which() -> None:
    """One host, VCPU min_unit 8 above max_unit 4: no amount fits anywhere, so the answer
    is "no allocation candidates" (not a rejection of the job), naming the inventory."""
    job = make_job(
        [rp("cn", inv={"VCPU": {"total": 16, "min_unit": 8, "max_unit": 4}})], "resources=VCPU:4"
    )
    with pytest.raises(Infeasible) as info:
        solve(job, Context())
    assert info.value.message == "no allocation candidates"
    assert [(p.path, p.message) for p in info.value.problems] == [
        (
            "providers[0].inventories.VCPU",
            "min_unit (8) exceeds max_unit (4): this inventory fits no request",
        )
    ]


def test_an_empty_or_fully_reserved_inventory_is_ordinary_and_not_named() -> None:
    """total 0 (max_unit defaults to 0) and reserved == total both leave capacity 0:
    they fit nothing, as any full host does, and are not reported as odd."""
    providers = [
        rp("empty", VCPU=0),
        rp("reserved", inv={"VCPU": {"total": 4, "reserved": 4}}),
        rp("cn", VCPU=4),
    ]
    cs = find(providers, "resources=VCPU:1")
    assert_candidates(cs, [({"cn": {"VCPU": 1}}, {"": ["cn"]})])
    assert "unusable_inventories" not in cs.extra()


# ---- repeated request-wide keys ---------------------------------------------------------


def three_hosts() -> list[dict[str, Any]]:
    """::

    +-------------+   +-------------+   +-------------+
    | h0  VCPU: 2 |   | h1  VCPU: 2 |   | h2  VCPU: 2 |
    +-------------+   +-------------+   +-------------+
    """
    return [rp(f"h{i}", VCPU=2) for i in range(3)]


@pytest.mark.parametrize(("query", "count"), [("limit=1&limit=2", 1), ("limit=2&limit=1", 2)])
def test_a_repeated_limit_keeps_the_first_value(query: str, count: int) -> None:
    """Three candidates exist (one per host); the first limit given caps them."""
    assert len(find(three_hosts(), f"resources=VCPU:1&{query}").requests) == count


def two_gpus() -> list[dict[str, Any]]:
    """One root with two VGPU children.

    ::

                 +--------+
                 |  host  |
                 +---+----+
            +--------+--------+
        +---+-------+    +----+------+
        | g1 VGPU: 2|    | g2 VGPU: 2|
        +-----------+    +-----------+
    """
    return [rp("host"), rp("g1", "host", VGPU=2), rp("g2", "host", VGPU=2)]


def test_a_repeated_group_policy_keeps_the_first_value() -> None:
    """Two suffixed groups of VGPU:1. isolate first: the groups take different children,
    (A, B) = (g1, g2) or (g2, g1). none first: each group may take either child, and
    both fit on one (2 VGPU each): four candidates."""
    base = "resources_A=VGPU:1&resources_B=VGPU:1"
    isolated = find(two_gpus(), f"{base}&group_policy=isolate&group_policy=none")
    assert_candidates(
        isolated,
        [
            ({"g1": {"VGPU": 1}, "g2": {"VGPU": 1}}, {"_A": ["g1"], "_B": ["g2"]}),
            ({"g2": {"VGPU": 1}, "g1": {"VGPU": 1}}, {"_A": ["g2"], "_B": ["g1"]}),
        ],
    )
    shared = find(two_gpus(), f"{base}&group_policy=none&group_policy=isolate")
    assert_candidates(
        shared,
        [
            ({"g1": {"VGPU": 2}}, {"_A": ["g1"], "_B": ["g1"]}),
            ({"g1": {"VGPU": 1}, "g2": {"VGPU": 1}}, {"_A": ["g1"], "_B": ["g2"]}),
            ({"g2": {"VGPU": 1}, "g1": {"VGPU": 1}}, {"_A": ["g2"], "_B": ["g1"]}),
            ({"g2": {"VGPU": 2}}, {"_A": ["g2"], "_B": ["g2"]}),
        ],
    )


def test_a_repeated_root_required_is_still_rejected() -> None:
    assert (
        rejection(three_hosts(), "resources=VCPU:1&root_required=T1&root_required=T2")
        == "Query parameter 'root_required' may be specified only once."
    )


# ---- mappings are sets -------------------------------------------------------------------


def host_and_storage() -> list[dict[str, Any]]:
    """A host whose uuid sorts after its storage's, listed first.

    ::

        +------------------+          +----------------------------+
        | z-host  VCPU: 4  |  agg     | a-storage  DISK_GB: 100    |
        |                  +----------+ MISC_SHARES_VIA_AGGREGATE  |
        +------------------+          +----------------------------+
    """
    return [
        rp("z-host", aggs=["agg"], VCPU=4),
        rp("a-storage", traits=[SHARES], aggs=["agg"], DISK_GB=100),
    ]


def test_a_mapping_lists_its_providers_sorted_by_uuid() -> None:
    """The unsuffixed group takes VCPU from z-host and DISK_GB from a-storage; its
    mapping is the set {z-host, a-storage}, written sorted: a-storage first, although
    the request names VCPU first and the job lists z-host first."""
    [request] = find(host_and_storage(), "resources=VCPU:1,DISK_GB:10").requests
    assert request["mappings"] == {"": ["a-storage", "z-host"]}
    assert list(request["allocations"]) == ["z-host", "a-storage"]


def test_the_same_job_twice_gives_the_same_bytes() -> None:
    job = {"providers": host_and_storage(), "request": "resources=VCPU:1,DISK_GB:10", "seed": 5}
    ctx = Context(default_policy=[{"module": "equal"}])

    def answer() -> bytes:
        envelope = run("launch_select", job, ctx).as_dict()
        del envelope["elapsed_ms"]
        return encode(envelope)

    assert answer() == answer()


def test_an_allocation_ratio_near_the_largest_float_gives_the_largest_capacity_quietly() -> None:
    """(10 - 0) × 1e308 overflows float64 to inf: the capacity is capped at the largest
    integer the engine counts with, so the host fits the request, with no warning."""
    import warnings

    job = {
        "providers": [
            {"uuid": "h", "inventories": {"VCPU": {"total": 10, "allocation_ratio": 1e308}}}
        ],
        "request": "resources=VCPU:5",
        "policy": None,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        envelope = run("launch_select", job)

    assert envelope.status == "ok"
    assert envelope.result is not None
    assert [c["allocations"] for c in envelope.result["allocation_requests"]] == [
        {"h": {"resources": {"VCPU": 5}}}
    ]
