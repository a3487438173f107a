"""The provider forest: structural checks, capacity, accounts."""

from __future__ import annotations

from typing import Any

import pytest

from apportion.errors import Rejected
from apportion.limits import Limits
from tests.unit.placement.helpers import assert_candidates, find, rp


def problems(
    providers: list[dict[str, Any]], limits: Limits | None = None
) -> list[tuple[str, str]]:
    with pytest.raises(Rejected) as info:
        find(providers, "resources=VCPU:1", limits)
    return [(p.path, p.message) for p in info.value.problems]


def test_a_duplicate_uuid_is_rejected_with_both_paths() -> None:
    assert problems([rp("a", VCPU=1), rp("b"), rp("a")]) == [
        ("providers[2].uuid", "duplicate provider uuid 'a' (also providers[0])")
    ]


def test_an_unknown_parent_is_rejected() -> None:
    assert problems([rp("a"), rp("b", "ghost")]) == [
        ("providers[1].parent_provider_uuid", "unknown parent provider 'ghost'")
    ]


def test_a_parent_cycle_is_rejected() -> None:
    """::

    r        a -> b -> c -> a
    """
    found = problems([rp("r"), rp("a", "c"), rp("b", "a"), rp("c", "b")])
    assert found == [
        ("providers[1].parent_provider_uuid", "the parents of provider 'a' form a cycle")
    ]


def test_a_provider_that_is_its_own_parent_is_a_cycle() -> None:
    assert problems([rp("a", "a")]) == [
        ("providers[0].parent_provider_uuid", "the parents of provider 'a' form a cycle")
    ]


def test_malformed_names_are_rejected_where_they_are() -> None:
    found = problems(
        [rp("a", traits=["ok_TRAIT", "GOOD"], inv={"vcpu": {"total": 1}}), rp("b", VCPU=1)]
    )
    assert found == [
        ("providers[0].inventories.vcpu", "invalid resource class name"),
        ("providers[0].traits[0]", "invalid trait name 'ok_TRAIT'"),
    ]


def test_inconsistent_inventories_and_usages_are_rejected() -> None:
    found = problems(
        [
            rp(
                "a",
                inv={"VCPU": {"total": 4, "reserved": 5}},
                used={"MEMORY_MB": 1},
            ),
            rp("b", inv={"VCPU": {"total": 2**53}}, used={}),
            rp("c", VCPU=1, used={"VCPU": -1}),
        ]
    )
    assert found == [
        ("providers[0].inventories.VCPU.reserved", "reserved (5) exceeds total (4)"),
        (
            "providers[0].usages.MEMORY_MB",
            "usage of MEMORY_MB but the provider has no MEMORY_MB inventory",
        ),
        ("providers[1].inventories.VCPU.total", "must be at most 9007199254740991"),
        ("providers[2].usages.VCPU", "must be between 0 and 9007199254740991"),
    ]


def test_more_providers_than_the_limit_are_rejected() -> None:
    assert problems([rp("a"), rp("b"), rp("c")], Limits(max_providers=2)) == [
        (
            "providers",
            "3 providers exceed the limit of 2 (raise APPORTION_LIMITS__MAX_PROVIDERS)",
        )
    ]


def test_an_empty_inventory_with_default_max_unit_is_valid_and_fits_nothing() -> None:
    cs = find([rp("a", VCPU=0), rp("b", VCPU=2)], "resources=VCPU:1")
    assert_candidates(cs, [({"b": {"VCPU": 1}}, {"": ["b"]})])


def test_capacity_is_total_minus_reserved_times_the_allocation_ratio_truncated() -> None:
    """(10 - 3) * 1.5 = 10.5 → 10; 4 used leaves 6."""
    host = rp(
        "cn", inv={"VCPU": {"total": 10, "reserved": 3, "allocation_ratio": 1.5}}, used={"VCPU": 4}
    )
    assert len(find([host], "resources=VCPU:6").requests) == 1
    assert find([host], "resources=VCPU:7").requests == []
    assert find([host], "resources=VCPU:6").provider_summaries["cn"]["resources"]["VCPU"] == {
        "capacity": 10,
        "used": 4,
    }


@pytest.mark.parametrize(
    ("amount", "fits"),
    [(1, False), (2, True), (3, False), (4, True), (6, True), (8, False)],
)
def test_an_amount_must_respect_min_unit_max_unit_and_step_size(amount: int, fits: bool) -> None:
    host = rp("cn", inv={"VGPU": {"total": 16, "min_unit": 2, "max_unit": 6, "step_size": 2}})
    assert bool(find([host], f"resources=VGPU:{amount}").requests) is fits


def test_max_unit_defaults_to_total_even_with_overcommit() -> None:
    host = rp("cn", inv={"VCPU": {"total": 4, "allocation_ratio": 4.0}})
    assert len(find([host], "resources=VCPU:4").requests) == 1
    assert find([host], "resources=VCPU:5").requests == []


def test_accounts_default_to_the_root_account_then_the_root_uuid() -> None:
    """::

    cn1 (account "acme")     cn2 (no account)     cn3 (no account)
      |                        |
    numa1 (account "x")      numa2
    """
    providers = [
        rp("cn1", account="acme", VCPU=1),
        rp("numa1", "cn1", account="x", VCPU=1),
        rp("cn2", VCPU=1),
        rp("numa2", "cn2", VCPU=1),
        rp("cn3", VCPU=1),
    ]
    cs = find(providers, "resources=VCPU:1")
    assert cs.provider_accounts == {
        "cn1": "acme",
        "numa1": "x",
        "cn2": "cn2",
        "numa2": "cn2",
        "cn3": "cn3",
    }
    assert cs.account_of("numa2") == "cn2"
    # A candidate belongs to the account of its anchoring tree's root.
    by_provider = {next(iter(r["allocations"])): r["account"] for r in cs.requests}
    assert by_provider == {
        "cn1": "acme",
        "numa1": "acme",
        "cn2": "cn2",
        "numa2": "cn2",
        "cn3": "cn3",
    }


def test_children_may_be_listed_before_their_parents() -> None:
    """::

    cn
     |
    numa (listed first)
     |
    gpu (listed second)
    """
    cs = find([rp("gpu", "numa", VGPU=1), rp("numa", "cn"), rp("cn")], "resources=VGPU:1")
    assert_candidates(cs, [({"gpu": {"VGPU": 1}}, {"": ["gpu"]})])
    assert cs.anchors == ["cn"]
    assert cs.provider_summaries["gpu"]["root_provider_uuid"] == "cn"
    assert cs.provider_summaries["gpu"]["parent_provider_uuid"] == "numa"


def test_integers_beyond_any_float_are_rejected_not_crashed_on() -> None:
    found = problems([rp("a", inv={"VCPU": {"total": 10**400}}), rp("b", VCPU=1)])
    assert found == [("providers[0].inventories.VCPU.total", "must be at most 9007199254740991")]
