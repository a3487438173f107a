"""The seed's steps, one scenario each, with concrete pools and quantities."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.attach.support import (
    PRODUCT,
    attach,
    chosen,
    consumer,
    ent,
    job,
    pool,
    stacking,
    syspurpose,
)


def _dropped(payload: dict[str, Any]) -> dict[str, str]:
    result = attach(payload)
    return {d["pool"]: d["filter"] for d in result["explanation"]["dropped_pools"]}


# ---- Validate Pools --------------------------------------------------------------------


def test_pools_that_can_never_cover_the_consumer_are_removed_with_the_reason() -> None:
    pools = [
        pool("ppc", pattrs={"arch": "ppc64le"}),
        pool("virt", attrs={"virt_only": "true"}),
        pool("empty", quantity=5, consumed=5),
        pool("instances", quantity=1, pattrs={"instance_multiplier": "2"}),
        pool("future", start="2027-01-01T00:00:00Z"),
        pool("expired", end="2026-01-01T00:00:00Z"),
        pool("good"),
    ]
    # The seed drops a physical consumer's pool below its instance_multiplier; rules.js
    # keeps it (test_candlepin_rules.py).
    payload = job(consumer(arch="x86_64"), pools, [PRODUCT], rules="seed")
    assert _dropped(payload) == {
        "ppc": "arch",
        "virt": "virt_only",
        "empty": "quantity",
        "instances": "instance_multiplier",
        "future": "date",
        "expired": "date",
    }
    assert chosen(payload) == {"good": 1}


def test_a_guest_may_use_virt_only_and_instance_based_pools_with_one_entitlement() -> None:
    pools = [
        pool("virt", attrs={"virt_only": "true"}),
        pool("instances", "other", quantity=1, pattrs={"instance_multiplier": "2"}),
    ]
    payload = job(consumer(guest=True), pools, [PRODUCT, "other"])
    assert _dropped(payload) == {}
    assert chosen(payload) == {"virt": 1, "instances": 1}


def test_the_check_time_is_the_jobs_at_or_else_the_context_clock() -> None:
    pools = [pool("p", start="2026-07-01T00:00:00Z")]
    assert chosen(job(consumer(), pools, [PRODUCT])) == {}  # ctx.now is 2026-06-01
    assert chosen(job(consumer(), pools, [PRODUCT], at="2026-07-02T00:00:00Z")) == {"p": 1}


def test_a_pool_without_multi_entitlement_counts_as_one() -> None:
    # Ten available but not multi-entitlement: one 2-socket entitlement cannot cover 8.
    p = pool("single", quantity=10, pattrs={"stacking_id": "s", "sockets": "2"})
    result = attach(job(consumer(sockets="8"), [p], [PRODUCT]))
    assert result["pool_quantities"] == {}
    (group,) = result["explanation"]["groups"]
    assert group["status"] == "invalid"
    assert group["coverage_failures"] == ["sockets"]


# ---- Get Attached Entitlements / Installed Products -----------------------------------


def test_attached_entitlements_complete_a_partial_stack() -> None:
    stack_pool = pool("s-pool", quantity=10, pattrs=stacking("s", sockets="2"))
    payload = job(
        consumer(sockets="8", installed=(PRODUCT,)),
        [stack_pool],
        None,
        entitlements=[ent("e1", stack_pool, quantity=2)],
    )
    result = attach(payload)
    assert result["explanation"]["compliance"]["partial_stacks"] == ["s"]
    assert result["pool_quantities"] == {"s-pool": 2}
    assert result["covered_products"] == [PRODUCT]


def test_compliant_products_and_provided_roles_are_not_covered_again() -> None:
    have = pool("have", "a", pattrs=syspurpose(roles="Server"))
    pools = [pool("pa", "a", pattrs=syspurpose(roles="Server")), pool("pb", "b")]
    cons = consumer(installed=("a", "b"), role="server")
    result = attach(job(cons, pools, None, entitlements=[ent("e1", have)]))
    assert result["explanation"]["products_to_cover"] == ["b"]
    assert result["explanation"]["roles_needed"] == []
    assert result["pool_quantities"] == {"pb": 1}


def test_requested_products_that_are_compliant_are_skipped() -> None:
    have = pool("have", "a")
    payload = job(
        consumer(installed=("a",)),
        [pool("pa", "a"), pool("pb", "b")],
        ["a", "b"],
        entitlements=[ent("e1", have)],
    )
    assert chosen(payload) == {"pb": 1}


# ---- Build and Validate Entitlement Groups ---------------------------------------------


def test_pools_with_the_same_stacking_id_form_one_group() -> None:
    pools = [
        pool("s1", quantity=2, pattrs=stacking("s", sockets="2")),
        pool("single"),
        pool("s2", quantity=2, pattrs=stacking("s", sockets="2")),
    ]
    result = attach(job(consumer(sockets="8"), pools, [PRODUCT]))
    keys = [g["group"] for g in result["explanation"]["groups"]]
    assert keys == ["pool:single", "stack:s"]  # visited in reverse input order


def test_a_stack_broken_by_a_small_ram_pool_is_repaired_by_removing_it() -> None:
    # The seed's example: socket entitlements plus one covering 1 GB of RAM make the
    # whole stack partial; removing the pools that enforce RAM makes it valid.
    pools = [
        pool("sockets", quantity=2, pattrs=stacking("s", sockets="4")),
        pool("ram", quantity=1, pattrs=stacking("s", ram="1")),
    ]
    result = attach(job(consumer(sockets="8", ram="16777216"), pools, [PRODUCT]))
    (group,) = result["explanation"]["groups"]
    assert group["removed_by_validation"] == ["ram"]
    assert result["pool_quantities"] == {"sockets": 2}


# ---- Remove extra attributes / Prune ---------------------------------------------------


def test_parallel_stacks_are_reduced_to_one_attribute() -> None:
    # Sockets pools and a cores pool each cover on their own; the reference keeps the
    # first smallest candidate (without the cores pools) — the sockets pool, 4 of it.
    pools = [
        pool("s1", quantity=4, pattrs=stacking("s", sockets="2")),
        pool("c1", quantity=1, pattrs=stacking("s", cores="8")),
    ]
    result = attach(job(consumer(sockets="8", cores="1"), pools, [PRODUCT]))
    (group,) = result["explanation"]["groups"]
    assert group["removed_as_extra_attributes"] == ["c1"]
    assert result["pool_quantities"] == {"s1": 4}


def test_a_guest_keeps_the_virt_only_pools_when_removing_extra_attributes() -> None:
    pools = [
        pool("v1", quantity=8, attrs={"virt_only": "true"}, pattrs=stacking("s", vcpu="2")),
        pool("r1", quantity=4, pattrs=stacking("s", ram="8")),
    ]
    cons = consumer(guest=True, sockets="4", cores="2", ram="8388608")
    result = attach(job(cons, pools, [PRODUCT]))
    (group,) = result["explanation"]["groups"]
    assert group["removed_as_extra_attributes"] == ["r1"]
    assert result["pool_quantities"] == {"v1": 4}


def test_pools_not_needed_for_coverage_are_pruned_lowest_priority_first() -> None:
    pools = [
        pool("one-socket", quantity=100, pattrs=stacking("s", sockets="1")),
        pool("four-socket", quantity=100, pattrs=stacking("s", sockets="4")),
    ]
    result = attach(job(consumer(sockets="8"), pools, [PRODUCT]))
    (group,) = result["explanation"]["groups"]
    assert group["pruned"] == ["one-socket"]
    assert result["pool_quantities"] == {"four-socket": 2}


# ---- Select Best Entitlement Groups ----------------------------------------------------


def test_a_partial_stack_is_completed_before_any_better_group() -> None:
    partial = pool("stack-pool", quantity=10, pattrs=stacking("s", sockets="2"))
    better = pool("single", pattrs={"sockets": "8"})
    payload = job(
        consumer(sockets="8", installed=(PRODUCT,)),
        [partial, better],
        None,
        entitlements=[ent("e1", partial, quantity=1)],
    )
    result = attach(payload)
    assert result["pool_quantities"] == {"stack-pool": 3}
    assert result["explanation"]["picks"][0]["reason"] == "completes a partial stack"


def test_the_group_covering_most_products_wins_and_no_excess_group_is_added() -> None:
    pools = [pool("one", "x", provided=("p1",)), pool("both", "y", provided=("p1", "p2"))]
    result = attach(job(consumer(), pools, ["p1", "p2"], rules="seed"))
    assert result["pool_quantities"] == {"both": 1}
    assert result["explanation"]["picks"][0]["decided_by"] == "products_covered"


def test_a_host_specific_pool_wins_for_a_guest() -> None:
    pools = [
        pool("virt", attrs={"virt_only": "true"}),
        pool("host", attrs={"virt_only": "true", "requires_host": "h1"}),
        pool("plain"),
    ]
    result = attach(job(consumer(guest=True), pools, [PRODUCT], host_uuid="h1"))
    assert result["pool_quantities"] == {"host": 1}
    assert result["explanation"]["picks"][0]["decided_by"].startswith("host_specific_pools")


def test_higher_average_priority_wins_between_equal_groups() -> None:
    pools = [
        pool("premium", pattrs=syspurpose(sla="Premium")),
        pool("standard", pattrs=syspurpose(sla="Standard")),
    ]
    result = attach(job(consumer(sla="Premium"), pools, [PRODUCT]))
    assert result["pool_quantities"] == {"premium": 1}
    pick = result["explanation"]["picks"][0]
    assert pick["decided_by"] == "average_priority"
    assert pick["runner_up"] == "pool:standard"


def test_every_needed_product_gets_a_group_and_uncoverable_ones_are_reported() -> None:
    pools = [pool("pa", "a"), pool("pb", "b")]
    result = attach(job(consumer(), pools, ["a", "b", "c"]))
    assert result["pool_quantities"] == {"pb": 1, "pa": 1}
    assert result["covered_products"] == ["a", "b"]
    assert result["uncovered_products"] == ["c"]


# ---- Select Pool Quantity --------------------------------------------------------------


@pytest.mark.parametrize(
    ("sockets", "expected"), [("1", 2), ("2", 2), ("3", 4), ("6", 6), ("7", 8)]
)
def test_physical_quantities_step_by_the_instance_multiplier(sockets: str, expected: int) -> None:
    p = pool("inst", quantity=100, pattrs=stacking("s", sockets="2", instance_multiplier="2"))
    assert chosen(job(consumer(sockets=sockets), [p], [PRODUCT])) == {"inst": expected}


def test_the_pool_processed_first_is_minimised_while_later_ones_stay_at_maximum() -> None:
    # Neither pool covers 8 sockets and 16 GB alone. The pool ending first sorts first
    # (+1 in the comparison); pruning reverses the order, so the other pool is minimised
    # first against the first one's maximum (3 → 6 sockets, 12 GB): it needs just 1.
    attrs = stacking("s", sockets="2", ram="4")
    pools = [
        pool("ends-first", quantity=3, pattrs=attrs, end="2030-01-01T00:00:00Z"),
        pool("ends-later", quantity=3, pattrs=attrs),
    ]
    result = attach(job(consumer(sockets="8", ram="16777216"), pools, [PRODUCT]))
    assert result["pool_quantities"] == {"ends-later": 1, "ends-first": 3}
