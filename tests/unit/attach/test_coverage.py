"""Coverage rules and filters, case by case: stacking, guests, arch, syspurpose, dates."""

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


def _filters(payload: dict[str, Any]) -> dict[str, str]:
    return {d["pool"]: d["filter"] for d in attach(payload)["explanation"]["dropped_pools"]}


# ---- sizes that stack ------------------------------------------------------------------


def test_cores_stack_to_sockets_times_cores_per_socket() -> None:
    p = pool("c", quantity=10, pattrs=stacking("s", cores="2"))
    assert chosen(job(consumer(sockets="2", cores="4"), [p], [PRODUCT])) == {"c": 4}


def test_ram_stacks_in_whole_gigabytes_rounded_from_kib() -> None:
    # 16000000 KiB is 15.26 GiB, which the reference rounds to 15 GB: 4 GB pools need 4.
    p = pool("r", quantity=10, pattrs=stacking("s", ram="4"))
    assert chosen(job(consumer(ram="16000000"), [p], [PRODUCT])) == {"r": 4}
    # 15.6 GiB rounds up to 16 GB, still 4; 16.6 rounds to 17: 5 needed.
    assert chosen(job(consumer(ram="16357785"), [p], [PRODUCT])) == {"r": 4}
    assert chosen(job(consumer(ram="17406361"), [p], [PRODUCT])) == {"r": 5}


def test_a_non_stacked_pool_too_small_for_the_consumer_is_filtered() -> None:
    pools = [
        pool("two-socket", pattrs={"sockets": "2"}),
        pool("two-core", pattrs={"cores": "2"}),
        pool("small-ram", pattrs={"ram": "8"}),
        pool("small-band", pattrs={"storage_band": "1"}),
        pool("big", pattrs={"sockets": "8", "cores": "32", "ram": "64", "storage_band": "10"}),
    ]
    cons = consumer(sockets="4", cores="4", ram="16777216", facts={"band.storage.usage": "2.5"})
    payload = job(cons, pools, [PRODUCT])
    assert _filters(payload) == {
        "two-socket": "sockets",
        "two-core": "cores",
        "small-ram": "ram",
        "small-band": "storage_band",
    }
    assert chosen(payload) == {"big": 1}


def test_storage_band_usage_with_decimals_stacks() -> None:
    p = pool("band", quantity=10, pattrs=stacking("s", storage_band="1"))
    cons = consumer(facts={"band.storage.usage": "2.5"})
    assert chosen(job(cons, [p], [PRODUCT])) == {"band": 3}


def test_a_guest_is_sized_by_vcpu_and_a_pool_without_vcpu_counts_its_cores() -> None:
    vcpu = pool("vcpu", quantity=10, pattrs=stacking("v", vcpu="4"))
    cores = pool("cores", "other", quantity=10, pattrs=stacking("c", cores="2"))
    guest = consumer(guest=True, sockets="2", cores="4")  # 8 vCPUs
    assert chosen(job(guest, [vcpu, cores], [PRODUCT, "other"])) == {"vcpu": 2, "cores": 4}


def test_a_guest_is_not_sized_by_sockets() -> None:
    p = pool("sockets", quantity=10, pattrs=stacking("s", sockets="1"))
    assert chosen(job(consumer(guest=True, sockets="8"), [p], [PRODUCT])) == {"sockets": 1}


def test_a_guest_on_a_host_restricted_stack_is_not_checked_on_ram_or_vcpu() -> None:
    p = pool(
        "derived",
        quantity=10,
        attrs={"requires_host": "h", "virt_only": "true"},
        pattrs=stacking("s", vcpu="1", ram="1"),
    )
    guest = consumer(guest=True, sockets="8", ram="33554432")
    assert chosen(job(guest, [p], [PRODUCT], host_uuid="h")) == {"derived": 1}


# ---- guest_limit -----------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "expected"), [("3", {"p": 1}), ("2", {}), ("-1", {"p": 1})])
def test_guest_limit_counts_only_active_libvirt_guests(
    limit: str, expected: dict[str, int]
) -> None:
    cons = consumer(active_guests=3)
    cons["guest_ids"] += [
        {"guest_id": "off", "attributes": {"virtWhoType": "libvirt", "active": "0"}},
        {"guest_id": "esx", "attributes": {"virtWhoType": "esx", "active": "1"}},
        "plain-guest-id",
    ]
    p = pool("p", pattrs={"guest_limit": limit})
    assert chosen(job(cons, [p], [PRODUCT])) == expected


# ---- arch ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pool_arch", "consumer_arch", "ok"),
    [
        ("ALL", "s390x", True),
        ("x86", "i686", True),
        ("X86", "i386", True),
        ("x86", "x86_64", False),
        ("x86_64,ppc64le", "ppc64le", True),
        ("x86_64", "X86_64", True),
        ("ppc64", "x86_64", False),
    ],
)
def test_arch_lists_match_with_all_and_the_x86_family(
    pool_arch: str, consumer_arch: str, ok: bool
) -> None:
    payload = job(consumer(arch=consumer_arch), [pool("p", pattrs={"arch": pool_arch})], [PRODUCT])
    assert chosen(payload) == ({"p": 1} if ok else {})


def test_a_system_without_an_arch_fact_cannot_use_an_arch_restricted_pool() -> None:
    restricted = pool("p", pattrs={"arch": "x86_64"})
    assert chosen(job(consumer(), [restricted], [PRODUCT])) == {}
    hypervisor = consumer(ctype="hypervisor")
    assert chosen(job(hypervisor, [restricted], [PRODUCT])) == {"p": 1}


def test_an_arch_mismatch_inside_a_stack_removes_the_pools_carrying_arch() -> None:
    pools = [
        pool("any", quantity=4, pattrs=stacking("s", sockets="2")),
        pool("ppc", quantity=4, pattrs=stacking("s", sockets="2", arch="ppc64")),
    ]
    result = attach(job(consumer(arch="x86_64", sockets="8"), pools, [PRODUCT]))
    # The ppc pool is filtered before grouping (pre-entitlement arch check).
    assert {d["pool"]: d["filter"] for d in result["explanation"]["dropped_pools"]} == {
        "ppc": "arch"
    }
    assert result["pool_quantities"] == {"any": 4}


# ---- who may use a pool ----------------------------------------------------------------


def test_requires_host_needs_a_guest_of_that_host() -> None:
    p = pool("p", attrs={"requires_host": "host-a", "virt_only": "true"})
    assert chosen(job(consumer(guest=True), [p], [PRODUCT], host_uuid="host-a")) == {"p": 1}
    for cons, host in (
        (consumer(guest=True), "host-b"),
        (consumer(guest=True), None),
        (consumer(), "host-a"),
    ):
        assert _filters(job(cons, [p], [PRODUCT], host_uuid=host)) == {
            "p": "requires_host" if cons["facts"].get("virt.is_guest") else "virt_only"
        }


def test_unmapped_guest_pools_are_only_for_guests_without_a_known_host() -> None:
    p = pool("p", attrs={"unmapped_guests_only": "true", "virt_only": "true"})
    assert chosen(job(consumer(guest=True), [p], [PRODUCT])) == {"p": 1}
    assert _filters(job(consumer(guest=True), [p], [PRODUCT], host_uuid="h")) == {
        "p": "unmapped_guests_only"
    }


@pytest.mark.parametrize(
    ("attrs", "cons", "dropped"),
    [
        ({"physical_only": "true"}, consumer(guest=True), "physical_only"),
        ({"requires_consumer": "someone-else"}, consumer(), "requires_consumer"),
        ({"requires_consumer_type": "person"}, consumer(), "requires_consumer_type"),
        ({"virt_only": "TRUE"}, consumer(), "virt_only"),
    ],
)
def test_pre_entitlement_filters_name_the_rule(
    attrs: dict[str, str], cons: dict[str, Any], dropped: str
) -> None:
    assert _filters(job(cons, [pool("p", attrs=attrs)], [PRODUCT])) == {"p": dropped}


def test_a_hypervisor_may_use_pools_for_systems() -> None:
    p = pool("p", pattrs={"requires_consumer_type": "system"})
    assert chosen(job(consumer(ctype="hypervisor"), [p], [PRODUCT])) == {"p": 1}


def test_an_attached_non_multi_entitlement_pool_is_not_offered_again() -> None:
    # Attached but too small (2 of 4 sockets): the product stays partially compliant.
    have = pool("have", pattrs={"sockets": "2"})
    payload = job(
        consumer(sockets="4", installed=(PRODUCT,)), [have], None, entitlements=[ent("e1", have)]
    )
    assert _filters(payload) == {"have": "already_attached"}


# ---- quantities ------------------------------------------------------------------------


def test_consumed_entitlements_reduce_what_is_available() -> None:
    p = pool("p", quantity=10, consumed=7, pattrs=stacking("s", sockets="2"))
    assert chosen(job(consumer(sockets="6"), [p], [PRODUCT])) == {"p": 3}
    assert chosen(job(consumer(sockets="8"), [p], [PRODUCT])) == {}


def test_an_unlimited_stack_takes_what_covers_the_consumer() -> None:
    p = pool("p", quantity=-1, pattrs=stacking("s", cores="4", instance_multiplier="2"))
    # Physical: steps of 2; each step adds 4 × 2 = 8 cores: 16 cores need 4.
    assert chosen(job(consumer(sockets="4", cores="4"), [p], [PRODUCT])) == {"p": 4}


# ---- syspurpose ------------------------------------------------------------------------


def test_a_role_only_pool_is_attached_alongside_the_product_pool() -> None:
    pools = [pool("product"), pool("role", "role-sku", pattrs=syspurpose(roles="Server"))]
    assert chosen(job(consumer(role="server"), pools, [PRODUCT])) == {"role": 1, "product": 1}


def test_addons_given_as_one_comma_string_are_split_and_trimmed() -> None:
    cons = consumer()
    cons["addons"] = " EUS , ELS "
    pools = [
        pool("eus", "x", pattrs=syspurpose(addons="eus")),
        pool("els", "y", pattrs=syspurpose(addons="ELS")),
    ]
    assert chosen(job(cons, pools, [])) == {"els": 1, "eus": 1}


# ---- compliance computed from entitlements ---------------------------------------------


def test_compliance_is_computed_from_the_entitlements_when_not_given() -> None:
    covered = pool("covered", "a")
    partial = pool("partial", "b", quantity=10, pattrs=stacking("s", sockets="2"))
    expired = pool("expired", "c", end="2026-01-01T00:00:00Z")
    cons = consumer(sockets="8", installed=("a", "b", "c"))
    payload = job(
        cons,
        [partial, pool("c-now", "c")],
        None,
        entitlements=[ent("e-a", covered), ent("e-b", partial, 1), ent("e-c", expired)],
    )
    result = attach(payload)
    assert result["explanation"]["compliance"] == {
        "source": "computed",
        "compliant_products": ["a"],
        "partially_compliant_products": ["b"],
        "non_compliant_products": ["c"],
        "partial_stacks": ["s"],
        "attached_entitlements": ["e-b", "e-a"],
    }
    assert result["pool_quantities"] == {"partial": 3, "c-now": 1}
    assert result["covered_products"] == ["b", "c"]


def test_a_non_stacked_entitlement_too_small_leaves_its_product_partially_compliant() -> None:
    small = pool("small", "a", pattrs={"sockets": "2"})
    result = attach(
        job(consumer(sockets="4", installed=("a",)), [], None, entitlements=[ent("e1", small)])
    )
    assert result["explanation"]["compliance"]["partially_compliant_products"] == ["a"]
    assert result["uncovered_products"] == ["a"]


def test_entitlement_dates_override_the_pool_dates() -> None:
    p = pool("p", "a")
    e = ent("e1", p)
    e["end_date"] = "2026-01-01T00:00:00Z"
    result = attach(job(consumer(installed=("a",)), [pool("fresh", "a")], None, entitlements=[e]))
    assert result["explanation"]["compliance"]["non_compliant_products"] == ["a"]
    assert result["pool_quantities"] == {"fresh": 1}


def test_derived_products_are_not_what_a_normal_attach_covers() -> None:
    p = pool("dc", "dc-sku", derived="guest-sku", derived_provided=("rhel",))
    assert chosen(job(consumer(), [p], ["rhel"])) == {}
